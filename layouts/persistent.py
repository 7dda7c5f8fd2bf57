"""Register/shared-memory tiles of the persistent kernels (kernels/persistent_lstm.cu).

A block owns ``rows_per_block`` consecutive rows of a [R, K] matrix (forward: the gate-interleaved
W_hh, 4 rows per hidden unit; backward: its transpose, one row per unit). Inside the block, lane
``r * lane_k + kk`` of warp ``w`` holds rows ``rl * lane_rows + r`` (rl < rows_per_lane) at columns
``w * cols_per_lane * lane_k + i * lane_k + kk`` (i < cols_per_lane), with lane_k = 32 / lane_rows.
The packed array is [blocks, warps, cols_per_lane, rows_per_lane, 32]: the kernel's loads of its
tile are coalesced, and its i-th register column is one contiguous 32-float run per row slot.
Rows and columns past the matrix are zero padding. ``unpack_block_rows`` is the exact inverse.
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
