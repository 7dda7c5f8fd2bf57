"""Array-module helpers: which module an array belongs to, and moving arrays host <-> GPU.

CuPy is optional; nothing here imports it until a CuPy array or a GPU is asked about.
"""
from __future__ import annotations

import functools

import numpy as np


@functools.lru_cache(maxsize=None)
def cupy_or_none():
    try:
        import cupy
    except Exception:  # not installed, or no CUDA libraries on this machine
        return None
    return cupy


@functools.lru_cache(maxsize=None)
def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    cupy = cupy_or_none()
    if cupy is None:
        return False
    try:
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def is_gpu_array(a) -> bool:
    return _is_gpu_type(type(a))


@functools.lru_cache(maxsize=64)
def _is_gpu_type(cls) -> bool:
    """Per array type, once (an inference call asks ~15 times: host-bound at small batch)."""
    cupy = cupy_or_none() if cls.__module__.startswith("cupy") else None
    return cupy is not None and issubclass(cls, cupy.ndarray)


def c_contiguous(a) -> bool:
    """Whether ``a`` (NumPy or CuPy) is C-ordered; CuPy's own flag where it has one (its ``flags`` object is made per
    access: ~0.5 µs, on a replay's host path before the launch)."""
    flag = getattr(a, "_c_contiguous", None)
    return a.flags.c_contiguous if flag is None else bool(flag)


def data_address(a) -> int:
    """The device (CuPy) or host (NumPy) address of ``a``'s first element."""
    if hasattr(a, "__array_interface__"):   # NumPy (``a.data`` fails for ml_dtypes' bf16)
        return a.__array_interface__["data"][0]
    return a.data.ptr


def module_of(a):
    return cupy_or_none() if is_gpu_array(a) else np


def to_module(a, xp):
    """Move ``a`` (or None) to array module ``xp`` (numpy or cupy), copying only if needed."""
    if a is None or module_of(a) is xp:
        return a
    return a.get() if xp is np else xp.asarray(a)
