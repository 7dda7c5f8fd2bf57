"""Shared GPU infrastructure for the CuPy engines: compiled-module cache and device facts.

Modules are compiled through NVRTC (cupy.RawModule) from ``kernels/*.cu`` with compile-time
constants as ``-D`` options, and cached per (source file, its text, options, device).
"""
from __future__ import annotations

import functools
import hashlib

from .arrays import cupy_or_none
from .kernels import source


def _cupy():
    cupy = cupy_or_none()
    if cupy is None:
        raise ImportError("cupy is not installed (pip install ecornn[gpu])")
    return cupy


@functools.lru_cache(maxsize=None)
def _compiled(file: str, digest: str, options: tuple, device: int, cooperative: bool):
    cupy = _cupy()
    with cupy.cuda.Device(device):
        module = cupy.RawModule(code=source(file), options=("-std=c++17",) + options,
                                enable_cooperative_groups=cooperative)
        module.compile()
    return module


# What CuPy's NVRTC path adds to a RawModule's options besides the architecture (CuPy 13-14).
_CUPY_NVRTC_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")


@functools.lru_cache(maxsize=None)
def _cuda_include_options() -> tuple:
    """-I of a CUDA include directory with cooperative_groups.h (CuPy's RawModule finds it on its own; a bare NVRTC
    program searches nowhere): CUDA_PATH's, CuPy's CUDA path's, nvcc's, or a pip-installed CUDA runtime's."""
    import glob
    import os
    import shutil
    cupy = _cupy()
    roots = [os.environ.get("CUDA_PATH"), cupy.cuda.get_cuda_path(), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    dirs = [os.path.join(r, "include") for r in roots if r]
    dirs += glob.glob(os.path.join(os.path.dirname(os.path.dirname(cupy.__file__)), "nvidia", "*", "include"))
    cuda = next((d for d in dirs if os.path.isfile(os.path.join(d, "cooperative_groups.h"))), None)
    # its headers include <nv/target> (libcu++): the toolkit's CCCL, else CuPy's copy (what its RawModule uses)
    cccl = [os.path.join(cuda, "cccl")] if cuda else []
    cccl.append(os.path.join(os.path.dirname(cupy.__file__), "_core", "include", "cupy", "_cccl", "libcudacxx"))
    target = next((d for d in [cuda] + cccl if d and os.path.isfile(os.path.join(d, "nv", "target"))), None)
    if cuda is None or target is None:
        raise RuntimeError(f"no CUDA include directory with cooperative_groups.h and nv/target among {dirs + cccl}")
    return tuple(dict.fromkeys((f"-I{cuda}", f"-I{target}")))


@functools.lru_cache(maxsize=None)
def _compiled_for_arch(file: str, digest: str, options: tuple, device: int, cooperative: bool, arch: str):
    """v54: kernels/<file> built by NVRTC for ``arch`` (e.g. "sm_90a", whose architecture-specific instructions such
    as setmaxnreg CuPy's RawModule cannot target: it adds its own -arch=sm_XY, and NVRTC refuses a second -arch),
    the cubin cached on disk by its inputs (CUPY_CACHE_DIR, as CuPy's) and loaded as a RawModule."""
    import os
    from cupy.cuda import nvrtc
    cupy = _cupy()
    flags = ("-std=c++17", f"-arch={arch}") + _CUPY_NVRTC_OPTIONS + _cuda_include_options() + options
    key = hashlib.sha1("\0".join((source(file),) + flags + (str(nvrtc.getVersion()),)).encode()).hexdigest()
    cache = os.environ.get("CUPY_CACHE_DIR", os.path.expanduser("~/.cupy/kernel_cache"))
    path = os.path.join(cache, f"ecornn-{arch}-{key}.cubin")
    if not os.path.isfile(path):
        program = nvrtc.createProgram(source(file), file, (), ())
        try:
            nvrtc.compileProgram(program, flags)
        except nvrtc.NVRTCError as exc:
            raise RuntimeError(f"NVRTC ({arch}) failed on {file} {options}:\n{nvrtc.getProgramLog(program)}") from exc
        cubin = nvrtc.getCUBIN(program)
        nvrtc.destroyProgram(program)
        os.makedirs(cache, exist_ok=True)
        partial = f"{path}.{os.getpid()}"
        with open(partial, "wb") as out:
            out.write(cubin)
        os.replace(partial, path)   # whole files only: another process may be reading the cache
    with cupy.cuda.Device(device):
        module = cupy.RawModule(path=path, enable_cooperative_groups=cooperative)
        module.compile()
    return module


def compile_module(file: str, defines: dict | None = None, cooperative: bool = False,
                   extra_options: tuple = (), arch: str | None = None):
    """Return a compiled RawModule of kernels/<file> for the current device (cached); ``arch`` (v54): an
    architecture-specific target such as "sm_90a" instead of CuPy's sm_XY of the device."""
    cupy = _cupy()
    options = tuple(f"-D{k}={v}" for k, v in sorted((defines or {}).items())) + tuple(extra_options)
    digest = hashlib.sha1(source(file).encode()).hexdigest()
    if arch:
        return _compiled_for_arch(file, digest, options, cupy.cuda.Device().id, cooperative, arch)
    return _compiled(file, digest, options, cupy.cuda.Device().id, cooperative)


@functools.lru_cache(maxsize=None)
def device_properties(device: int | None = None) -> dict:
    """The facts the capacity model and the planner need, read off the device."""
    cupy = _cupy()
    device = cupy.cuda.Device().id if device is None else device
    p = cupy.cuda.runtime.getDeviceProperties(device)
    name = p["name"].decode() if isinstance(p["name"], bytes) else str(p["name"])
    return {
        "name": name,
        "compute_capability": (p["major"], p["minor"]),
        "sm_count": p["multiProcessorCount"],
        "regs_per_sm": p["regsPerMultiprocessor"],
        "regs_per_block": p["regsPerBlock"],
        "smem_per_sm": p["sharedMemPerMultiprocessor"],
        "smem_per_block_optin": p["sharedMemPerBlockOptin"],
        "max_threads_per_sm": p["maxThreadsPerMultiProcessor"],
        "l2_bytes": p["l2CacheSize"],
        "cooperative_launch": bool(p.get("cooperativeLaunch", 1)),
    }
