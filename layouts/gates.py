"""Gate-blocked <-> gate-interleaved rows, and per-block tiles of whole hidden units.

Framework (gate-blocked) rows of a [4H, ...] array: ``q*H + j`` for gate q in (i, f, g, o) and
hidden unit j. Gate-interleaved rows: ``4*j + q``, so the four gate rows of unit j are adjacent and
a block or warp that owns unit j computes all its gates without exchanging data.
"""
from __future__ import annotations

import numpy as np


def _split_rows(a, hidden: int):
    if a.shape[0] != 4 * hidden:
        raise ValueError(f"leading axis: expected 4*hidden = {4 * hidden} rows, got {a.shape[0]}")
    return a.reshape((4, hidden) + tuple(a.shape[1:]))


def gate_interleave(a, hidden: int):
    """[4H, ...] gate-blocked -> [4H, ...] gate-interleaved (row 4*j+q <- row q*H+j)."""
    return _split_rows(a, hidden).swapaxes(0, 1).reshape(a.shape)


def gate_deinterleave(a, hidden: int):
    """Inverse of gate_interleave."""
    if a.shape[0] != 4 * hidden:
        raise ValueError(f"leading axis: expected 4*hidden = {4 * hidden} rows, got {a.shape[0]}")
    return a.reshape((hidden, 4) + tuple(a.shape[1:])).swapaxes(0, 1).reshape(a.shape)


def gate_deinterleave_as(a, hidden: int, dtype):
    """gate_deinterleave(a) as a new C-ordered array of ``dtype``: one strided copy that casts as it
    goes (no intermediate in a's dtype)."""
    if a.shape[0] != 4 * hidden:
        raise ValueError(f"leading axis: expected 4*hidden = {4 * hidden} rows, got {a.shape[0]}")
    view = a.reshape((hidden, 4) + tuple(a.shape[1:])).swapaxes(0, 1)
    return view.astype(dtype, order="C").reshape(a.shape)


def gate_deinterleave_copy(a, hidden: int):
    """gate_deinterleave(a) as a new C-ordered array of a's dtype. A C-contiguous 2-D CuPy ``a`` goes as
    four strided 2-D memcpys on the current stream, gate q's rows (every 4th from row q) to rows q*H...:
    CuPy's strided copy of the same view ran at ~0.7 TB/s (persistent v31); else gate_deinterleave_as."""
    xp = _module(a)
    if xp is np or a.ndim != 2 or not a.flags.c_contiguous:
        return gate_deinterleave_as(a, hidden, a.dtype)
    _split_rows(a, hidden)   # the shape check
    out = xp.empty_like(a)
    row = a.shape[1] * a.itemsize
    stream = xp.cuda.get_current_stream().ptr
    for q in range(4):
        xp.cuda.runtime.memcpy2DAsync(out.data.ptr + q * hidden * row, row, a.data.ptr + q * row, 4 * row, row,
                                      hidden, xp.cuda.runtime.memcpyDeviceToDevice, stream)
    return out


def interleaved_permutation(hidden: int) -> np.ndarray:
    """Index array p with gate_interleave(a) == a[p]."""
    return gate_interleave(np.arange(4 * hidden), hidden)


def block_tiles(a, hidden: int, units_per_block: int, xp=None):
    """Gate-blocked [4H, K] -> [num_blocks, 4*units_per_block, K]: block b holds the four gate
    rows (interleaved) of units b*U .. b*U+U-1. Units past H are zero rows (padding)."""
    xp = xp or _module(a)
    blocks = -(-hidden // units_per_block)
    rows = gate_interleave(a, hidden)
    pad = blocks * units_per_block - hidden
    if pad:
        rows = xp.concatenate([rows, xp.zeros((4 * pad,) + tuple(a.shape[1:]), a.dtype)], axis=0)
    return rows.reshape((blocks, 4 * units_per_block) + tuple(a.shape[1:]))


def unblock_tiles(tiles, hidden: int):
    """Inverse of block_tiles (drops the padding units)."""
    rows = tiles.reshape((-1,) + tuple(tiles.shape[2:]))[: 4 * hidden]
    return gate_deinterleave(rows, hidden)


def _module(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy")
