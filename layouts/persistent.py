"""Register/shared-memory tiles of the persistent kernels (kernels/persistent_lstm.cu).

A block owns ``rows_per_block`` consecutive rows of a [R, K] matrix (forward: the gate-interleaved
W_hh, 4 rows per hidden unit; backward: its transpose, one row per unit). Inside the block, lane
``r * lane_k + kk`` of warp ``w`` holds rows ``rl * lane_rows + r`` (rl < rows_per_lane) at columns
``w * cols_per_lane * lane_k + i * lane_k + kk`` (i < cols_per_lane), with lane_k = 32 / lane_rows.
The packed array is [blocks, warps, cols_per_lane, rows_per_lane, 32]: the kernel's loads of its
tile are coalesced, and its i-th register column is one contiguous 32-float run per row slot.
Rows and columns past the matrix are zero padding. ``unpack_block_rows`` is the exact inverse.

v4 (kernels/persistent_mma.cu, fp16/bf16): ``pack_mma_fragments`` cuts a block's rows into 16 x 16
tiles and stores them as the per-lane A-fragment registers of mma.sync.m16n8k16 (16-bit pairs in
uint32 words), [blocks, warps, k_tiles, m_tiles, 32 lanes, 4 registers].
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TileShape:
    """How one block's rows are spread over warps, lanes and registers."""

    blocks: int
    rows_per_block: int   # matrix rows a block owns (4U forward, U backward)
    warps: int
    lane_rows: int        # distinct rows across a warp's lanes (divides 32)
    rows_per_lane: int
    cols_per_lane: int

    @property
    def lane_k(self) -> int:
        return 32 // self.lane_rows

    @property
    def tile_rows(self) -> int:
        return self.rows_per_lane * self.lane_rows

    @property
    def padded_cols(self) -> int:
        return self.warps * self.lane_k * self.cols_per_lane

    def validate(self, rows: int, cols: int) -> None:
        if 32 % self.lane_rows:
            raise ValueError(f"lane_rows: expected a divisor of 32, got {self.lane_rows}")
        if self.tile_rows < self.rows_per_block:
            raise ValueError(f"tile rows: expected >= rows_per_block {self.rows_per_block}, "
                             f"got {self.tile_rows}")
        if self.blocks * self.rows_per_block < rows:
            raise ValueError(f"blocks x rows_per_block: expected >= {rows} rows, "
                             f"got {self.blocks * self.rows_per_block}")
        if self.padded_cols < cols:
            raise ValueError(f"padded columns: expected >= {cols}, got {self.padded_cols}")


def _xp(a):
    return np if isinstance(a, np.ndarray) else __import__("cupy")


def pack_block_rows(matrix, shape: TileShape):
    """[R, K] -> [blocks, warps, cols_per_lane, rows_per_lane, 32] (zero padded)."""
    xp = _xp(matrix)
    rows, cols = matrix.shape
    shape.validate(rows, cols)
    s = shape
    padded = xp.pad(matrix, ((0, s.blocks * s.rows_per_block - rows), (0, s.padded_cols - cols)))
    per_block = padded.reshape(s.blocks, s.rows_per_block, s.padded_cols)
    per_block = xp.pad(per_block, ((0, 0), (0, s.tile_rows - s.rows_per_block), (0, 0)))
    split = per_block.reshape(s.blocks, s.rows_per_lane, s.lane_rows, s.warps, s.cols_per_lane,
                              s.lane_k)
    tiles = split.transpose(0, 3, 4, 1, 2, 5)
    return xp.ascontiguousarray(tiles.reshape(s.blocks, s.warps, s.cols_per_lane, s.rows_per_lane, 32))


def unpack_block_rows(tiles, shape: TileShape, rows: int, cols: int):
    """Inverse of pack_block_rows: the original [rows, cols] matrix."""
    s = shape
    split = tiles.reshape(s.blocks, s.warps, s.cols_per_lane, s.rows_per_lane, s.lane_rows, s.lane_k)
    per_block = split.transpose(0, 3, 4, 1, 2, 5).reshape(s.blocks, s.tile_rows, s.padded_cols)
    return per_block[:, : s.rows_per_block].reshape(-1, s.padded_cols)[:rows, :cols]


# ---- v4: packed mma A-fragments (kernels/persistent_mma.cu) ------------------------------------
@dataclass(frozen=True)
class MmaTileShape:
    """How one block's rows are cut into 16 x 16 mma tiles: ``m_tiles`` row tiles (rows padded to
    16 * m_tiles), ``warps`` warps each owning ``k_tiles`` consecutive 16-column tiles."""

    blocks: int
    rows_per_block: int   # matrix rows a block owns (4U forward, U backward)
    warps: int
    m_tiles: int
    k_tiles: int

    @property
    def tile_rows(self) -> int:
        return 16 * self.m_tiles

    @property
    def padded_cols(self) -> int:
        return 16 * self.warps * self.k_tiles

    def validate(self, rows: int, cols: int) -> None:
        if self.tile_rows < self.rows_per_block:
            raise ValueError(f"16 x m_tiles: expected >= rows_per_block {self.rows_per_block}, got {self.tile_rows}")
        if self.blocks * self.rows_per_block < rows:
            raise ValueError(f"blocks x rows_per_block: expected >= {rows} rows, "
                             f"got {self.blocks * self.rows_per_block}")
        if self.padded_cols < cols:
            raise ValueError(f"padded columns: expected >= {cols}, got {self.padded_cols}")


def half_bits(matrix, bf16: bool):
    """The 16-bit patterns (uint32 holding uint16) of ``matrix`` rounded to fp16 or bf16 (round to
    nearest even, as the kernel's cvt.rn): exact for values that came from that dtype."""
    xp = _xp(matrix)
    if not bf16:
        return matrix.astype(xp.float16).view(xp.uint16).astype(xp.uint32)
    bits = xp.ascontiguousarray(matrix.astype(xp.float32)).view(xp.uint32)
    rounded = bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))
    return rounded >> xp.uint32(16)


def _padded_block_tiles(matrix, shape: MmaTileShape):
    """[R, K] -> [blocks, tile_rows, padded_cols] (zero padded per block)."""
    xp = _xp(matrix)
    rows, cols = matrix.shape
    s = shape
    padded = xp.pad(matrix, ((0, s.blocks * s.rows_per_block - rows), (0, s.padded_cols - cols)))
    per_block = padded.reshape(s.blocks, s.rows_per_block, s.padded_cols)
    return xp.pad(per_block, ((0, 0), (0, s.tile_rows - s.rows_per_block), (0, 0)))


def pack_mma_fragments(matrix, shape: MmaTileShape, bf16: bool):
    """[R, K] float -> uint32 [blocks, warps, k_tiles, m_tiles, 32, 4]: lane l = 4g + c of warp w
    holds registers a0..a3 of tile (m, k) = (m-tile, w * k_tiles + k-tile) per the fragment map
    of kernels/mma_common.cuh (a_{2*ch + rh} = rows g + 8 rh, columns 2c + 8 ch and + 1, the
    lower column in the low 16 bits). Rows and columns past the matrix are zero."""
    xp = _xp(matrix)
    bits = half_bits(mma_fragment_order(matrix, shape), bf16)
    return xp.ascontiguousarray(bits[..., 0] | (bits[..., 1] << xp.uint32(16)))


def pack_split_fragments(hi, lo, shape: MmaTileShape):
    """The fp32 split's tile (v13): pack_mma_fragments of the fp16 halves hi and lo, the lo m-tiles
    after the hi ones -> uint32 [blocks, warps, k_tiles, 2 * m_tiles, 32, 4] (the kernel's kATiles)."""
    xp = _xp(hi)
    return xp.concatenate([pack_mma_fragments(hi, shape, False), pack_mma_fragments(lo, shape, False)], axis=3)


def mma_fragment_order(matrix, shape: MmaTileShape):
    """[R, K] (any dtype) -> [blocks, warps, k_tiles, m_tiles, 32, 4, 2]: the elements of
    pack_mma_fragments' words in its order, the low half of each word first (zero padded)."""
    s = shape
    s.validate(*matrix.shape)
    # axes: block, m-tile, rh, g | warp, k-tile, ch, c, pair
    split = _padded_block_tiles(matrix, s).reshape(s.blocks, s.m_tiles, 2, 8, s.warps, s.k_tiles, 2, 4, 2)
    ordered = split.transpose(0, 4, 5, 1, 3, 7, 6, 2, 8)  # block, warp, k-tile, m-tile, g, c, ch, rh, pair
    return ordered.reshape(s.blocks, s.warps, s.k_tiles, s.m_tiles, 32, 4, 2)


# ---- v7: the backward by gate rows (kernels/persistent_bwd_rows.cu) -----------------------------
@dataclass(frozen=True)
class ColumnTileShape:
    """A block's ``rows_per_block`` matrix rows with their columns dealt to ``threads`` threads:
    thread t holds columns t + c * threads for c < cols_per_thread, every row in registers."""

    blocks: int
    rows_per_block: int   # the 4U gate rows of the block's units
    threads: int
    cols_per_thread: int

    @property
    def padded_cols(self) -> int:
        return self.threads * self.cols_per_thread


def pack_column_tiles(matrix, shape: ColumnTileShape):
    """[R, K] -> [blocks, cols_per_thread, rows_per_block, threads]: element [b, c, g, t] is row
    b * rows_per_block + g, column t + c * threads (zero padded)."""
    xp = _xp(matrix)
    rows, cols = matrix.shape
    s = shape
    if s.blocks * s.rows_per_block < rows or s.padded_cols < cols:
        raise ValueError(f"column tiles {s} do not cover a [{rows}, {cols}] matrix")
    padded = xp.pad(matrix, ((0, s.blocks * s.rows_per_block - rows), (0, s.padded_cols - cols)))
    split = padded.reshape(s.blocks, s.rows_per_block, s.cols_per_thread, s.threads)
    return xp.ascontiguousarray(split.transpose(0, 2, 1, 3))


# ---- v10: packing again as one gather (refreshing prepared weights) ---------------------------------
def gather_index(layout, rows: int, cols: int, xp=np):
    """int32 index of the [rows, cols] source element that each element of ``layout(matrix)`` holds
    (-1: padding), flattened. ``layout`` must be a pure layout transform (reshapes, transposes, zero
    padding: the packs above), so applying it to the element indices tells where each one goes."""
    if rows * cols >= 2 ** 31 - 1:
        raise ValueError(f"gather_index: expected fewer than 2^31 elements, got {rows} x {cols}")
    ids = xp.arange(1, rows * cols + 1, dtype=xp.int32).reshape(rows, cols)
    return (xp.ascontiguousarray(layout(ids)).reshape(-1) - 1).astype(xp.int32, copy=False)


_GATHER = None   # the CuPy kernel of gather(), made at its first use


def gather(source, index, out) -> None:
    """``out.flat[i] = source.flat[index[i]]`` (0 where ``index[i] < 0``): a pack redone in one pass
    from a gather_index (``out``: C-contiguous, of source's dtype)."""
    global _GATHER
    if not out.flags.c_contiguous or out.size != index.size or out.dtype != source.dtype:
        raise ValueError(f"gather: expected a C-contiguous {source.dtype} out of {index.size} elements, "
                         f"got {out.dtype} {out.shape} (C order: {out.flags.c_contiguous})")
    xp = _xp(source)
    flat_source, flat_out = xp.ascontiguousarray(source).reshape(-1), out.reshape(-1)
    if xp is np:
        np.copyto(flat_out, np.where(index >= 0, flat_source[np.maximum(index, 0)], 0).astype(out.dtype))
        return
    if _GATHER is None:
        _GATHER = xp.ElementwiseKernel("raw T source, int32 index", "T out",
                                       "out = index >= 0 ? source[index] : (T)0", "ecornn_gather")
    _GATHER(flat_source, index, flat_out)
