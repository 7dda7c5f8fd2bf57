"""Packed mma A-fragments (layouts.persistent.pack_mma_fragments) against the m16n8k16 fragment map
of kernels/mma_common.cuh, decoded independently (tests/mma_emulation.py)."""
import numpy as np
import pytest

from ecornn.layouts.persistent import MmaTileShape, half_bits, pack_mma_fragments
from tests import mma_emulation as emu

SHAPES = [  # (shape, rows, cols): odd sizes, padding in rows, columns and blocks
    (MmaTileShape(blocks=3, rows_per_block=12, warps=2, m_tiles=1, k_tiles=2), 36, 57),
    (MmaTileShape(blocks=2, rows_per_block=40, warps=3, m_tiles=3, k_tiles=1), 77, 45),
    (MmaTileShape(blocks=4, rows_per_block=5, warps=1, m_tiles=1, k_tiles=3), 17, 48),
    (MmaTileShape(blocks=1, rows_per_block=32, warps=4, m_tiles=2, k_tiles=2), 32, 128),
]


def _matrix(rng, rows, cols, bf16):
    return emu.round_16(rng.standard_normal((rows, cols)), bf16).astype(np.float32)


def decode_matrix(tiles, shape, rows, cols, bf16):
    """[blocks, warps, k_tiles, m_tiles, 32, 4] -> the [rows, cols] matrix, via the fragment map."""
    a = emu.decode_a(tiles, bf16)                                   # [blk, w, kt, mt, 16, 16]
    full = a.transpose(0, 3, 4, 1, 2, 5).reshape(shape.blocks, shape.tile_rows, shape.padded_cols)
    return full, full[:, : shape.rows_per_block].reshape(-1, shape.padded_cols)[:rows, :cols]


@pytest.mark.parametrize("bf16", [False, True], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape, rows, cols", SHAPES)
def test_decoding_the_fragments_gives_back_the_matrix(rng, shape, rows, cols, bf16):
    matrix = _matrix(rng, rows, cols, bf16)
    tiles = pack_mma_fragments(matrix, shape, bf16)
    assert tiles.shape == (shape.blocks, shape.warps, shape.k_tiles, shape.m_tiles, 32, 4)
    assert tiles.dtype == np.uint32
    full, got = decode_matrix(tiles, shape, rows, cols, bf16)
    np.testing.assert_array_equal(got, matrix)
    # everything outside the matrix (row padding of each block, columns past K) is zero
    assert np.count_nonzero(full) == np.count_nonzero(matrix)


@pytest.mark.parametrize("pass_name", ["forward", "backward"])
@pytest.mark.parametrize("bf16", [False, True], ids=["fp16", "bf16"])
@pytest.mark.parametrize("batch", [1, 3, 8, 11])
@pytest.mark.parametrize("shape, rows, cols", SHAPES)
def test_emulated_warp_products_equal_the_matrix_vector_product(rng, shape, rows, cols, batch, bf16, pass_name):
    """Per warp: decode A and B fragments as the kernel feeds mma.sync, multiply in float64, store
    and re-read the partials with the kernel's formulas: the block sums equal W . h."""
    matrix = _matrix(rng, rows, cols, bf16)
    tiles = pack_mma_fragments(matrix, shape, bf16)
    vec = np.zeros((shape.padded_cols, batch), np.float32)
    vec[:cols] = rng.standard_normal((cols, batch))

    class Plan:  # what emu.block_sums reads off a plan (the pass picks the partial-sum layout)
        dtype = "bfloat16" if bf16 else "float16"

        @staticmethod
        def tile_shape():
            return shape

    Plan.pass_name = pass_name
    sums = emu.block_sums(Plan, tiles, vec)                           # [blocks, tile_rows, B]
    got = sums[:, : shape.rows_per_block].reshape(-1, batch)[:rows]
    want = matrix.astype(np.float64) @ emu.round_16(vec[:cols], bf16)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_bf16_bits_round_to_nearest_even():
    values = np.array([1.0, 1.00390625, 1.01171875, -2.5, 3.0e38, 0.0], np.float32)
    import ml_dtypes
    want = values.astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(half_bits(values, bf16=True), want)
    np.testing.assert_array_equal(half_bits(values, bf16=False), values.astype(np.float16).view(np.uint16))


def test_fragment_order_matches_the_kernel_index():
    """Word (block, warp, kt, mt, lane, reg) = (W[r][k], W[r][k+1]) with r = mt*16 + g + 8*(reg%2),
    k = (warp*k_tiles + kt)*16 + 2c + 8*(reg//2) — the formula load_tiles and mma_16816 rely on."""
    shape = MmaTileShape(blocks=2, rows_per_block=32, warps=2, m_tiles=2, k_tiles=2)
    matrix = np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 2039   # exact in fp16
    tiles = pack_mma_fragments(matrix, shape, bf16=False)
    for blk, w, kt, mt, lane, reg in [(0, 0, 0, 0, 0, 0), (1, 1, 1, 1, 31, 3), (0, 1, 0, 1, 13, 2), (1, 0, 1, 0, 6, 1)]:
        g, c = lane // 4, lane % 4
        r = blk * 32 + mt * 16 + g + 8 * (reg % 2)
        k = (w * 2 + kt) * 16 + 2 * c + 8 * (reg // 2)
        lo, hi = emu.to_float(emu.halves(tiles[blk, w, kt, mt, lane, reg]), False)
        assert (lo, hi) == (matrix[r, k], matrix[r, k + 1])


@pytest.mark.parametrize("bf16", [False, True], ids=["fp16", "bf16"])
@pytest.mark.parametrize("shape, rows, cols", SHAPES)
def test_one_gather_of_the_16bit_values_repacks_the_fragments(rng, shape, rows, cols, bf16):
    """v10's refresh: gather_index of the fragment order, then one gather of the matrix's 16-bit
    bits, gives pack_mma_fragments' words bitwise (padding zero)."""
    from ecornn.layouts.persistent import gather, gather_index, mma_fragment_order
    matrix = _matrix(rng, rows, cols, bf16)
    index = gather_index(lambda ids: mma_fragment_order(ids, shape), rows, cols)
    bits = half_bits(matrix, bf16).astype(np.uint16)                   # the framework's 16-bit storage
    out = np.full((shape.blocks, shape.warps, shape.k_tiles, shape.m_tiles, 32, 4), 0xDEADBEEF, np.uint32)
    gather(bits, index, out.view(np.uint16))
    np.testing.assert_array_equal(out, pack_mma_fragments(matrix, shape, bf16))
