"""CUDA C++ sources of ecornn's kernels, shipped as package data (installed as ``ecornn.kernels``).

Each ``*.cu`` file is compiled at run time through NVRTC (CuPy) with compile-time constants passed
as ``-D`` options, and at test time by nvcc (tests/test_kernel_build.py). A file declares the
constants for that check in lines ``// ecornn-check: -DNAME=VALUE ...`` and carries the line
``// ecornn-persistent`` when it must not spill.

Device code shared by several kernels lives in headers ``kernels/*.cuh``, included as
``#include "name.cuh"``. nvcc resolves such a line relative to the .cu file; for NVRTC, which gets
no include path, :func:`source` substitutes the header's text for the line, so the program text is
self-contained (and CuPy's cache key, the text, changes whenever a header does).
"""
import re
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent

# A line `#include "name"` (quoted form only: <system> headers are NVRTC's own).
_LOCAL_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]*)"[^\n]*$', flags=re.M)


def source(name: str) -> str:
    """Text of kernels/<name> (e.g. "fused_pointwise.cu"), local headers inlined.

    Every ``#include "x"`` line names a file in kernels/ and is replaced by that file's text,
    recursively, each header once (a repeated include becomes a comment); ``#line`` directives keep
    compiler diagnostics pointing at the right file and line. A quoted include of anything else
    raises ValueError: NVRTC could not resolve it.
    """
    return _inlined(name, seen=set())


def _inlined(name: str, seen: set) -> str:
    text = (KERNEL_DIR / name).read_text()

    def substitute(match):
        header = match.group(1)
        line = text.count("\n", 0, match.start()) + 1
        path = KERNEL_DIR / header
        if "/" in header or "\\" in header or not path.is_file():
            raise ValueError(f'kernels/{name}:{line}: #include "{header}" names no file in {KERNEL_DIR} '
                             f"(NVRTC gets no include path: shared device code must be a header there)")
        if header in seen:
            return f"// #include \"{header}\": already inlined above"
        seen.add(header)
        body = _inlined(header, seen)
        return (f'#line 1 "{header}"\n{body.rstrip(chr(10))}\n'
                f'#line {line + 1} "{name}"')

    return _LOCAL_INCLUDE.sub(substitute, text)


def sources() -> list:
    return sorted(KERNEL_DIR.glob("*.cu"))
