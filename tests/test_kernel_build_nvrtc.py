"""Every persistent kernel's check lines (``// ecornn-check:``) also build spill-free under NVRTC, the compiler the
engine's kernels go through on the device (CuPy's RawModule), for sm_90.

nvcc's check (test_kernel_build.py) is not enough: NVRTC 13.0 spilled 4 bytes in a line that nvcc 13.0 built
spill-free (v58: fp32 H=1024 B=16's grouped split on clusters, at 255 registers), and the engine then fell back to
a slower plan on the device. NVRTC comes from the nvidia-cuda-nvrtc wheel (requirements/test-np1.txt, the device's
NVRTC version), the CUDA headers (cooperative_groups.h, cuda/std) from nvcc's toolkit.
"""
import ctypes
import functools
import glob
import importlib.util
import os
import re
import shutil

import pytest

from ecornn.kernels import source, sources

ARCH = "sm_90"   # the lent device's
NVCC = shutil.which("nvcc")
SPILL = re.compile(r"Function properties for (\S+)\n[^\n]*?(\d+) bytes spill stores, (\d+) bytes spill loads")


def nvrtc_library_dir():
    """The nvidia-cuda-nvrtc wheel's lib directory, or None."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so*")))
        if found:
            return os.path.dirname(found[0])
    return None


def cuda_include_dirs():
    """nvcc's toolkit headers and its CCCL headers (cooperative_groups.h includes <cuda/std/...>)."""
    if NVCC is None:
        return []
    candidates = [os.environ.get("CUDA_HOME", ""), "/usr/local/cuda",
                  os.path.dirname(os.path.dirname(os.path.realpath(NVCC)))]
    for root in filter(None, candidates):
        include = os.path.join(root, "include")
        if os.path.exists(os.path.join(include, "cooperative_groups.h")):
            return [include] + [d for d in (os.path.join(include, "cccl"),) if os.path.isdir(d)]
    return []


@functools.lru_cache(maxsize=None)
def _nvrtc():
    lib_dir = nvrtc_library_dir()
    for builtins in sorted(glob.glob(os.path.join(lib_dir, "libnvrtc-builtins.so.*"))):
        if ".alt." not in builtins:   # loaded first: NVRTC dlopens it by name at compile time
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(os.path.join(lib_dir, "libnvrtc.so." + nvrtc_major(lib_dir)))


def nvrtc_major(lib_dir) -> str:
    return sorted(glob.glob(os.path.join(lib_dir, "libnvrtc.so.*")))[0].rsplit(".so.", 1)[1].split(".")[0]


def nvrtc_log(code: str, options: list) -> str:
    """NVRTC's compile log of ``code`` (ptxas -v included); fails the test if the compile fails."""
    lib = _nvrtc()
    program = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(program), code.encode(), b"kernel.cu", 0, None, None) == 0
    try:
        encoded = [o.encode() for o in options]
        status = lib.nvrtcCompileProgram(program, len(encoded), (ctypes.c_char_p * len(encoded))(*encoded))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(program, log)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(program))
    text = log.value.decode(errors="replace")
    assert status == 0, f"NVRTC failed ({status}): {options}\n{text[-4000:]}"
    return text


def persistent_variants():
    for path in sources():
        text = path.read_text()
        if "// ecornn-persistent" not in text:
            continue
        for defines in re.findall(r"^// ecornn-check:(.*)$", text, flags=re.M):
            yield pytest.param(path.name, defines.split(), id=f"{path.name}-{'_'.join(defines.split())}")


needs_nvrtc = pytest.mark.skipif(nvrtc_library_dir() is None or not cuda_include_dirs(),
                                 reason="the nvidia-cuda-nvrtc wheel or the CUDA headers not found")


@pytest.mark.kernel_build
@needs_nvrtc
@pytest.mark.parametrize("name, defines", list(persistent_variants()))
def test_persistent_kernel_builds_without_spills_under_nvrtc(name, defines):
    # CuPy 14's NVRTC options: ours, -arch=sm_XX (a cubin); no -rdc, cooperative groups or not
    options = ["-std=c++17", f"-arch={ARCH}", "-Xptxas", "-v",
               *(f"-I{d}" for d in cuda_include_dirs()), *defines]
    log = nvrtc_log(source(name), options)
    spills = {fn: (int(s), int(l)) for fn, s, l in SPILL.findall(log)}
    kernels = [fn for fn in spills if fn.startswith("persistent_")]
    assert kernels, f"no persistent kernel in NVRTC's report ({defines}):\n{log[-2000:]}"
    assert all(spills[fn] == (0, 0) for fn in kernels), f"NVRTC spills ({defines}): {spills}\n{log[-3000:]}"


@pytest.mark.kernel_build
@needs_nvrtc
def test_the_check_reads_a_spill():
    """The report's parser finds a spill where one is forced (48 values live at once in 16 registers)."""
    code = ('extern "C" __global__ void persistent_probe(float* out) {\n    float v[48];\n'
            '#pragma unroll\n    for (int k = 0; k < 48; ++k) v[k] = out[k * 977];\n    float s = 0.f;\n'
            '#pragma unroll\n    for (int k = 0; k < 48; ++k) s += v[k] * v[47 - k];\n    out[1] = s;\n}\n')
    log = nvrtc_log(code, ["-std=c++17", f"-arch={ARCH}", "-Xptxas", "-v", "-maxrregcount=16"])
    spills = {fn: (int(s), int(l)) for fn, s, l in SPILL.findall(log)}
    assert spills.get("persistent_probe", (0, 0))[0] > 0, log
