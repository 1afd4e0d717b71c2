#!/usr/bin/env python3
"""Guards the GEMM micro-kernels' register allocation (src/gemm/kernels_avx512.cc,
kernels_avx2.cc): in every loop of a micro_kernel that does fused multiply-adds the accumulators
must live in registers, so no instruction of the loop may address the stack. A compiler that
keeps a memory copy of the accumulator array stores every accumulator at every step of k and
runs the kernel at a third of its speed while every result stays right (GCC 12 did so for the
avx2 kernel with the pointer-taking _mm256_broadcast_ss: docs/gemm.md).

Usage: check_kernel_loops.py OBJECT... (CTest passes every object of the library; all but the two
FMA kernel objects are skipped). Not run in the sanitizer builds, whose instrumentation may
spill. Needs objdump (binutils)."""
import re
import subprocess
import sys

FUNC = re.compile(r"^[0-9a-f]+ <(.*)>:$")
INSN = re.compile(r"^ +([0-9a-f]+):\t(.*)$")
JUMP = re.compile(r"^j[a-z]+ +([0-9a-f]+) <")


def bad_loops(obj):
    """Names of the micro_kernel functions of obj with an FMA loop that touches the stack."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", obj], check=True,
                         capture_output=True, text=True).stdout
    functions, name = {}, None
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            name = m.group(1)
            functions[name] = []
        elif name is not None and (m := INSN.match(line)):
            functions[name].append((int(m.group(1), 16), m.group(2)))
    bad = set()
    for name, insns in functions.items():
        if "micro_kernel<" not in name:
            continue
        # Every backward jump closes a loop [target, jump]; the K loops are the innermost loops
        # with an FMA (code laid out after the return may jump back over a whole loop, and the
        # register saves around it may use the stack).
        loops = []
        for addr, text in insns:
            j = JUMP.match(text)
            if j and int(j.group(1), 16) < addr:
                body = [t for a, t in insns if int(j.group(1), 16) <= a <= addr]
                if any("vfmadd" in t for t in body):
                    loops.append((int(j.group(1), 16), addr, body))
        for lo, hi, body in loops:
            inner = any(lo <= lo2 and hi2 <= hi and (lo2, hi2) != (lo, hi)
                        for lo2, hi2, _ in loops)
            if not inner and any("(%rsp)" in t or "(%rbp)" in t for t in body):
                bad.add(name)
    return sorted(bad)


def main(objects):
    kernels = [o for o in objects
               if o.endswith(("/kernels_avx512.cc.o", "/kernels_avx2.cc.o"))]
    if len(kernels) != 2:
        print(f"FAIL: expected the two FMA kernel objects, got {kernels}")
        return 1
    failed = False
    for obj in kernels:
        for name in bad_loops(obj):
            print(f"FAIL: {obj}: an FMA loop of {name} touches the stack")
            failed = True
    if not failed:
        print("ok: no FMA loop of a micro-kernel touches the stack (2 objects)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
