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


def compile_module(file: str, defines: dict | None = None, cooperative: bool = False,
                   extra_options: tuple = ()):
    """Return a compiled RawModule of kernels/<file> for the current device (cached)."""
    cupy = _cupy()
    options = tuple(f"-D{k}={v}" for k, v in sorted((defines or {}).items())) + tuple(extra_options)
    digest = hashlib.sha1(source(file).encode()).hexdigest()
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
