"""Arrays in device memory (a torch CUDA tensor, a CuPy or Numba array, anything that exposes
`__cuda_array_interface__` or a non-CPU `__dlpack_device__`): this Python package computes on the
CPU only, so such an argument is refused by name, before anything converts it. Without this check
numpy would either fail with an unrelated message or, for arrays that implement `__array__` by
copying to the host (Numba's), copy silently.
"""

# DLPack's device types (dlpack.h, DLDeviceType) whose memory the CPU can read.
_DLPACK_HOST_READABLE = {1: "CPU", 3: "CUDA host (pinned)", 11: "ROCm host (pinned)"}
_DLPACK_NAMES = {2: "CUDA", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI", 10: "ROCm",
                 12: "ExtDev", 13: "CUDA managed", 14: "oneAPI", 15: "WebGPU", 16: "Hexagon",
                 17: "MAIA"}

def no_cuda() -> str:
    """Why a CUDA argument is refused (a function, not a constant: TorchScript, which compiles
    blockrnn.torch's modules and so device_message, reads no global strings)."""
    return "this build of blockrnn has no CUDA backend"


NO_CUDA = no_cuda()


def device_message(op: str, name: str, device: str) -> str:
    """"<op>: <name> is on a <device> device; ..." for an argument in device memory (annotated:
    blockrnn.torch's scripted modules call it)."""
    if "CUDA" in device:
        return (f"{op}: {name} is on a {device} device; {no_cuda()}. Copy it to host memory "
                f"first (e.g. .cpu() or .get())")
    return (f"{op}: {name} is on a {device} device; blockrnn computes on the CPU only. Copy it "
            f"to host memory first")


def device_of(v):
    """The name of the device whose memory holds `v` ("CUDA", "ROCm", ...), or None when the CPU
    can read it (numpy arrays, CPU tensors, lists, anything else)."""
    try:
        if hasattr(v, "__cuda_array_interface__"):
            return "CUDA"
    except Exception:  # a property that refuses to describe a non-CUDA object
        pass
    probe = getattr(type(v), "__dlpack_device__", None)
    if probe is None:
        return None
    try:
        kind = int(probe(v)[0])
    except Exception:
        return None  # not a DLPack producer after all: left to numpy's conversion
    if kind in _DLPACK_HOST_READABLE:
        return None
    return _DLPACK_NAMES.get(kind, f"DLPack device type {kind}")
