"""CUDA C++ sources of ecornn's kernels, shipped as package data (installed as ``ecornn.kernels``).

Each ``*.cu`` file is compiled at run time through NVRTC (CuPy) with compile-time constants passed
as ``-D`` options, and at test time by nvcc (tests/test_kernel_build.py). A file declares the
constants for that check in lines ``// ecornn-check: -DNAME=VALUE ...`` and carries the line
``// ecornn-persistent`` when it must not spill.
"""
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent


def source(name: str) -> str:
    """Text of kernels/<name> (e.g. "fused_pointwise.cu")."""
    return (KERNEL_DIR / name).read_text()


def sources() -> list:
    return sorted(KERNEL_DIR.glob("*.cu"))
