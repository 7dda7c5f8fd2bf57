"""Persistent tile packing: exact inverse, zero padding, and the kernel's index formula."""
import numpy as np
import pytest

from ecornn.layouts.persistent import TileShape, pack_block_rows, unpack_block_rows

SHAPES = [
    (TileShape(blocks=4, rows_per_block=32, warps=4, lane_rows=32, rows_per_lane=1, cols_per_lane=3), 128, 12),
    (TileShape(blocks=3, rows_per_block=8, warps=2, lane_rows=8, rows_per_lane=1, cols_per_lane=5), 20, 37),
    (TileShape(blocks=5, rows_per_block=12, warps=3, lane_rows=4, rows_per_lane=3, cols_per_lane=2), 57, 40),
    (TileShape(blocks=2, rows_per_block=40, warps=1, lane_rows=16, rows_per_lane=3, cols_per_lane=7), 80, 13),
]


@pytest.mark.parametrize("shape, rows, cols", SHAPES)
def test_pack_is_exactly_inverted(rng, shape, rows, cols):
    matrix = rng.standard_normal((rows, cols)).astype(np.float32)
    tiles = pack_block_rows(matrix, shape)
    assert tiles.shape == (shape.blocks, shape.warps, shape.cols_per_lane, shape.rows_per_lane, 32)
    np.testing.assert_array_equal(unpack_block_rows(tiles, shape, rows, cols), matrix)
    assert np.count_nonzero(tiles) == np.count_nonzero(matrix)  # padding is zeros


@pytest.mark.parametrize("shape, rows, cols", SHAPES)
def test_kernel_index_formula(rng, shape, rows, cols):
    """Element (block, warp, i, rl, lane) is matrix[block*rpb + rl*LR + lane//LK, warp*KW + i*LK + lane%LK]."""
    matrix = rng.standard_normal((rows, cols))
    tiles = pack_block_rows(matrix, shape)
    lk = shape.lane_k
    for _ in range(200):
        blk, w = rng.integers(shape.blocks), rng.integers(shape.warps)
        i, rl, lane = rng.integers(shape.cols_per_lane), rng.integers(shape.rows_per_lane), rng.integers(32)
        local = rl * shape.lane_rows + lane // lk
        row = blk * shape.rows_per_block + local
        col = w * shape.cols_per_lane * lk + i * lk + lane % lk
        inside = local < shape.rows_per_block and row < rows and col < cols
        want = matrix[row, col] if inside else 0.0
        assert tiles[blk, w, i, rl, lane] == want


def test_rejects_too_small_tiles():
    shape = TileShape(blocks=2, rows_per_block=8, warps=1, lane_rows=8, rows_per_lane=1, cols_per_lane=1)
    with pytest.raises(ValueError, match="padded columns"):
        pack_block_rows(np.zeros((16, 5)), shape)
    with pytest.raises(ValueError, match="rows"):
        pack_block_rows(np.zeros((17, 4)), shape)


def test_column_tiles_deal_columns_to_threads():
    """v7 (kernels/persistent_bwd_rows.cu): element [block, c, g, t] is row block*R + g, column
    t + c*threads; padding rows and columns are zero."""
    from ecornn.layouts.persistent import ColumnTileShape, pack_column_tiles
    m = np.arange(10 * 7, dtype=np.float32).reshape(10, 7) + 1
    shape = ColumnTileShape(blocks=3, rows_per_block=4, threads=3, cols_per_thread=3)
    tiles = pack_column_tiles(m, shape)
    assert tiles.shape == (3, 3, 4, 3)
    for b, c, g, t in np.ndindex(*tiles.shape):
        row, col = b * 4 + g, t + c * 3
        assert tiles[b, c, g, t] == (m[row, col] if row < 10 and col < 7 else 0)
    with pytest.raises(ValueError, match="do not cover"):
        pack_column_tiles(m, ColumnTileShape(blocks=2, rows_per_block=4, threads=3, cols_per_thread=3))


@pytest.mark.parametrize("pack_name", ["block_rows", "column_tiles"])
def test_one_gather_repacks_like_the_pack(rng, pack_name):
    """v10's refresh: the packs are pure layouts, so gather_index(pack) and one gather of the new
    matrix give the packed tiles bitwise, padding included (zero)."""
    from ecornn.layouts.persistent import (ColumnTileShape, gather, gather_index, pack_column_tiles)
    rows, cols = 37, 29
    if pack_name == "block_rows":
        shape = TileShape(blocks=5, rows_per_block=8, warps=2, lane_rows=4, rows_per_lane=3, cols_per_lane=2)
        pack = lambda m: pack_block_rows(m, shape)  # noqa: E731
    else:
        shape = ColumnTileShape(blocks=4, rows_per_block=10, threads=8, cols_per_thread=4)
        pack = lambda m: pack_column_tiles(m, shape)  # noqa: E731
    matrix = rng.standard_normal((rows, cols)).astype(np.float32) + 1.0   # no zeros of its own
    want = pack(matrix)
    out = np.full(want.shape, np.nan, np.float32)
    gather(matrix, gather_index(pack, rows, cols), out)
    np.testing.assert_array_equal(out, want)
    assert np.count_nonzero(out == 0) == want.size - rows * cols            # the padding


def test_gather_refuses_an_out_it_cannot_fill(rng):
    from ecornn.layouts.persistent import gather
    index = np.arange(6, dtype=np.int32)
    with pytest.raises(ValueError, match="gather: expected a C-contiguous float32 out of 6 elements"):
        gather(np.zeros(6, np.float32), index, np.zeros((3, 4), np.float32)[:, :2])
