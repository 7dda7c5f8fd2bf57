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


def kernel_build_log(name: str, defines) -> str:
    """NVRTC's log of kernels/``name`` with ``defines`` (-DNAME=V strings) as the engine builds it: CuPy 14's options,
    ours and -arch=sm_XX (a cubin); no -rdc, cooperative groups or not."""
    return nvrtc_log(source(name), ["-std=c++17", f"-arch={ARCH}", "-Xptxas", "-v",
                                    *(f"-I{d}" for d in cuda_include_dirs()), *defines])


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
    log = kernel_build_log(name, defines)
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


# ---- the engine's back-off under NVRTC ----
# The quick bench's headline cells (benchmarks/bench_persistent.py) and v44's B=16, inference and training: every pass
# as the engine builds it on the device (persistent._compile_without_spills, H200 properties), NVRTC standing in for
# CuPy. A plan that backs off where it did not is a slower kernel that no nvcc check and no GPU test shows.
HEADLINE_CELLS = [("float32", 256, 1), ("float32", 512, 4), ("float32", 1024, 4), ("float32", 1024, 8),
                  ("float32", 512, 1), ("float32", 512, 8), ("float32", 1024, 1), ("float16", 1024, 8),
                  ("float16", 1024, 16), ("bfloat16", 1024, 4), ("bfloat16", 2048, 4), ("float32", 1024, 16)]
# (dtype, hidden, batch, training, pass) -> what its build keeps (NVRTC 13.0): the known back-offs
KNOWN_BACKOFFS = {("float32", 1024, 16, False, "forward"): ("reg_k_tiles", 2, "moves_outputs", False),
                  ("float32", 1024, 8, True, "backward"): ("reg_cols", 77)}


def _stack_bytes(log: str, function: str) -> int:
    found = re.search(rf"Function properties for {function}\n[^\n]*?(\d+) bytes stack frame", log)
    assert found, log[-2000:]
    return int(found.group(1))


def _nvrtc_module(plan, cooperative=True):
    """A stand-in for persistent._module: the build's local memory as NVRTC reports it (its stack frame)."""
    from types import SimpleNamespace

    from ecornn.engines import persistent
    defines = {**plan.defines(), **persistent._flag_defines()}
    log = kernel_build_log(plan.kernel_file, [f"-D{k}={v}" for k, v in defines.items()])
    return SimpleNamespace(get_function=lambda name: SimpleNamespace(local_size_bytes=_stack_bytes(log, name)))


@pytest.mark.kernel_build
@needs_nvrtc
@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
@pytest.mark.parametrize("dtype, hidden, batch", HEADLINE_CELLS)
def test_the_headline_plans_build_as_planned_under_nvrtc(monkeypatch, dtype, hidden, batch, training):
    from ecornn import LSTMConfig
    from ecornn.devices import KNOWN
    from ecornn.engines import persistent
    if training and (dtype, hidden, batch) == ("float32", 1024, 16):
        pytest.skip("v44's B=16 is an inference cell")
    monkeypatch.setattr(persistent, "_props", lambda: dict(KNOWN["h200"].as_dict()))
    monkeypatch.setattr(persistent, "_module", _nvrtc_module)
    plans = persistent.plans_for(LSTMConfig(hidden, hidden, 1, False, dtype, batch, 256), training)
    built = 0
    for pass_name, plan in plans.items():
        if plan.kind not in ("grid", "mma", "rows"):
            continue
        function = "persistent_lstm_fwd" if plan.pass_name == "forward" else "persistent_lstm_bwd"
        final, _ = persistent._compile_without_spills(plan, function, True)
        known = KNOWN_BACKOFFS.get((dtype, hidden, batch, training, pass_name))
        if known is None:
            assert final == plan, f"{pass_name} backed off:\n  asked {plan.describe()}\n  built {final.describe()}"
        else:
            kept = {known[k]: known[k + 1] for k in range(0, len(known), 2)}
            assert {k: getattr(final, k) for k in kept} == kept, final.describe()
        built += 1
    assert built, plans
