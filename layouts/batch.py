"""Batch padding: a time-major array's batch as more columns, the extra ones zero, and back.

An LSTM's batch columns never mix (every matrix product runs along the hidden and input sizes), so a
layer run on the caller's columns plus zero columns gives the caller's columns exactly as without
them; where the dy, dhT and dcT of the zero columns are zero too, so are their gradients, and the
weight gradients do not change. The persistent engine pads batches that its kernels split into
groups only when the batch is larger (an odd B, v47). Both transforms copy (C-ordered CuPy arrays by one
strided 2-D memcpy); ``first_columns`` is the inverse of ``pad_columns``.
"""
from __future__ import annotations

import numpy as np

BATCH_AXIS = 1   # x, y, dy, dx [T, B, .] and states [L*D, B, H]: time- or slot-major, batch second


def _module(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy")


def pad_columns(a, batch: int):
    """``a`` [N, b, ...] as a new C-ordered [N, batch, ...] array: its columns first, then zeros."""
    have = a.shape[BATCH_AXIS]
    if batch < have:
        raise ValueError(f"pad_columns: expected a batch of at least {have} columns, got {batch}")
    xp = _module(a)
    out = xp.empty((a.shape[0], batch) + tuple(a.shape[2:]), a.dtype)
    if not _copied_by_rows(out, a, have):
        out[:, :have] = a
    out[:, have:] = 0
    return out


def first_columns(a, batch: int, out=None):
    """The first ``batch`` columns of ``a`` [N, B, ...] as a C-ordered array (into ``out`` if given)."""
    if batch > a.shape[BATCH_AXIS]:
        raise ValueError(f"first_columns: expected at most {a.shape[BATCH_AXIS]} columns, got {batch}")
    if out is None:
        out = _module(a).empty((a.shape[0], batch) + tuple(a.shape[2:]), a.dtype)
    if not _copied_by_rows(out, a, batch):
        out[...] = a[:, :batch]
    return out


def _copied_by_rows(dst, src, columns: int) -> bool:
    """The first ``columns`` columns of every row of ``src`` into ``dst`` (both [N, ., ...], C-ordered CuPy arrays
    of one dtype) as one strided 2-D memcpy on the current stream, True; False where that does not apply (NumPy,
    other layouts). CuPy's elementwise copy of a strided view ran at ~0.7 TB/s (layouts.gates, persistent v31)."""
    xp = _module(src)
    if xp is np or src.dtype != dst.dtype or not (src.flags.c_contiguous and dst.flags.c_contiguous):
        return False
    column = src.strides[BATCH_AXIS]   # bytes of one batch column (the same in dst: C order, same trailing shape)
    xp.cuda.runtime.memcpy2DAsync(dst.data.ptr, dst.strides[0], src.data.ptr, src.strides[0], columns * column,
                                  src.shape[0], xp.cuda.runtime.memcpyDeviceToDevice,
                                  xp.cuda.get_current_stream().ptr)
    return True
