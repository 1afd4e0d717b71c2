"""The GPU runbook's Python helpers, on the CPU: the CSV writer of scripts/gpu_bench_torch.py (the
columns blockrnn_cuda_timing writes too) and the table of scripts/gpu_bench_table.py."""
import csv
import importlib.util
import pathlib

import pytest

SCRIPTS = pathlib.Path(__file__).resolve().parents[2] / "scripts"


def load(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load("gpu_bench_torch")
table = load("gpu_bench_table")

# blockrnn_cuda_timing's header (tests/cuda/cuda_timing.cc, kCsvHeader): the two writers agree.
TIMING_HEADER = "impl,cell,mode,T,B,H,I,pass,us_per_call,us_per_step,tflops,reps,device,status"


def test_csv_header_matches_the_timing_tool():
    assert ",".join(bench.CSV_HEADER) == TIMING_HEADER
    source = (SCRIPTS.parent / "tests" / "cuda" / "cuda_timing.cc").read_text()
    assert '"' + TIMING_HEADER + '"' in source.replace('"\n    "', "")


def test_csv_row_per_step_and_tflops():
    # LSTM, B = 16, I = H = 512: 2·16·1024·2048 = 67.1 MFLOP per forward step; 1000 µs over T = 100
    # steps is 10 µs per step, 6.71 TFLOP/s; forward + backward counts three times the arithmetic.
    row = bench.csv_row("cudnn", "lstm", "fp16", 100, 16, 512, "fwd", 1000.0, 7, "NVIDIA H100")
    assert row[:8] == ["cudnn", "lstm", "fp16", "100", "16", "512", "512", "fwd"]
    assert row[8:] == ["1000.000", "10.0000", "6.7109", "7", "NVIDIA H100", "ok"]
    fb = bench.csv_row("cudnn", "gru", "fp32", 100, 16, 512, "fwd+bwd", 1000.0, 3, "x")
    assert fb[10] == "%.4f" % (3 * 2.0 * 16 * 1024 * 1536 / 10e-6 / 1e12)


def test_csv_row_without_a_time_keeps_the_status():
    row = bench.csv_row("cudnn", "gru", "bf16", 10, 2, 4, "fwd", None, 0, "d", "unsupported: x")
    assert row[8:11] == ["", "", ""] and row[13] == "unsupported: x"


def test_csv_out_appends_with_one_header(tmp_path):
    path = tmp_path / "bench.csv"
    for _ in range(2):
        out = bench.CsvOut(str(path))
        out.write(bench.csv_row("cudnn", "lstm", "fp32", 10, 2, 4, "fwd", 5.0, 3, 'a "b", c'))
        out.close()
    rows = list(csv.reader(path.open()))
    assert rows[0] == bench.CSV_HEADER
    assert len(rows) == 3 and all(len(r) == len(bench.CSV_HEADER) for r in rows)
    assert rows[1][12] == 'a "b", c'  # quoted by the writer, read back whole


def test_arguments_are_checked():
    with pytest.raises(SystemExit):
        bench.parse_shapes(["10", "2"])
    with pytest.raises(SystemExit):
        bench.parse_shapes(["10", "0", "4"])
    assert bench.parse_shapes(["10", "2", "4", "5", "6", "7"]) == [(10, 2, 4), (5, 6, 7)]
    with pytest.raises(SystemExit):
        bench.split_list("fp32,fp8", bench.MODES, "mode")


def write_rows(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(bench.CSV_HEADER)
        for r in rows:
            w.writerow(r)


def test_table_pairs_blockrnn_with_cudnn(tmp_path):
    path = tmp_path / "bench.csv"
    dev = "NVIDIA H100 80GB HBM3"
    write_rows(path, [
        bench.csv_row("blockrnn", "lstm", "fp16", 100, 16, 512, "fwd", 2000.0, 5, dev),
        bench.csv_row("cudnn", "lstm", "fp16", 100, 16, 512, "fwd", 1000.0, 5, dev),
        bench.csv_row("torch-native", "lstm", "bf16", 100, 16, 512, "fwd", None, 0, dev,
                      "unsupported: no"),
        bench.csv_row("blockrnn", "gru_rb", "fp32", 100, 16, 512, "fwd", 900.0, 5, dev),
    ])
    lines = table.table_lines(table.read_rows(str(path)))
    assert lines[0].split()[:9] == ["cell", "mode", "T", "B", "H", "pass", "blockrnn_us",
                                    "torch_us", "torch_impl"]
    body = {tuple(l.split()[:2]): l.split() for l in lines[1:]}
    # blockrnn 20 µs/step against cuDNN 10: 0.50x; 3.36 TFLOP/s of the H100's 989 fp16 peak.
    assert body[("lstm", "fp16")][6:] == ["20.00", "10.00", "cudnn", "0.50x", "0.3"]
    assert body[("lstm", "bf16")][6:9] == ["-", "unsupported", "torch-native"]
    assert body[("gru_rb", "fp32")][7:10] == ["-", "-", "-"]  # no cuDNN counterpart
    assert [l.split()[0] for l in lines[1:]] == ["gru_rb", "lstm", "lstm"]


def test_peaks_by_device_name():
    assert table.peak_tflops("NVIDIA H100 80GB HBM3", "fp16") == 989.0
    assert table.peak_tflops("NVIDIA H100 PCIe", "tf32") == 378.0
    assert table.peak_tflops("NVIDIA H200", "fp32") == 67.0
    assert table.peak_tflops("blockrnn host emulation", "fp16") is None
