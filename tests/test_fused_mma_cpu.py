"""CPU tests of fused v3 (one tensor-core kernel per step, kernels/fused_step_mma.cu): the W_hh
fragment packing decoded by an independent reading of the m16n8k16 fragment map, an emulated mma
product equal to h W^T in float64, the tile choice and size rule, and the emulated engine with the
mma step (its launches counted) against cuBLAS + pointwise."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import fused_mma
from ecornn.engines.fused_mma import Tile, choose_tile, mma_decision, pack_weights
from ecornn.weights import LayerWeights, init_weights, to_dtype

from .fused_emulator import emulated, fake, mma_launches
from .helpers import rel_err


# ---- the fragment map, read independently of the packer ---------------------------------------

def physical_k(c, half):
    """The kernels' K order inside a k-step: logical (2c, 2c+1) -> physical 4c, 4c+1 (half 0:
    a0/a1/b0) and logical (2c+8, 2c+9) -> 4c+2, 4c+3 (half 1: a2/a3/b1)."""
    return 4 * c + 2 * half


def decode_b(packed, k, n):
    """Op [k, n] from packed B fragments, lane by lane as mma_common.cuh's B map says:
    b0 = B[2c, 2c+1][g], b1 = B[2c+8, 2c+9][g] (lower k in the low 16 bits), at physical_k."""
    blocks, k_steps, lanes, two_nt = packed.shape
    n_tiles = two_nt // 2
    op = np.zeros((16 * k_steps, blocks * 8 * n_tiles), np.uint16)
    for cb in range(blocks):
        for ks in range(k_steps):
            for lane in range(lanes):
                g, c = lane // 4, lane % 4
                for nt in range(n_tiles):
                    col = cb * 8 * n_tiles + 8 * nt + g
                    for half in (0, 1):
                        reg = int(packed[cb, ks, lane, 2 * nt + half])
                        row = 16 * ks + physical_k(c, half)
                        op[row, col], op[row + 1, col] = reg & 0xFFFF, reg >> 16
    return op[:k, :n]


def _interleaved_w(rng, hidden):
    from ecornn.layouts import gate_interleave
    w = rng.standard_normal((4 * hidden, hidden)).astype(np.float16)
    return np.ascontiguousarray(gate_interleave(w, hidden))


@pytest.mark.parametrize("hidden", [100, 40, 16])
@pytest.mark.parametrize("backward", [False, True])
@pytest.mark.parametrize("n_tiles", [1, 2, 4])
def test_packing_decodes_back_to_w(rng, hidden, backward, n_tiles):
    w = _interleaved_w(rng, hidden)
    packed = pack_weights(w, Tile(1, n_tiles, 4, backward))
    assert packed.dtype == np.uint32
    op = w.T if not backward else w
    got = decode_b(packed, *op.shape).view(np.float16)
    np.testing.assert_array_equal(got, op)
    full = decode_b(packed, 10**9, 10**9)  # with the padding: rows past K, columns past N are zero
    assert not full[op.shape[0]:].any() and not full[:, op.shape[1]:].any()


def _a_registers(act, row0, k0, lane):
    """The four A registers of a lane for the 16x16 tile at (row0, k0), as (lo, hi) float pairs,
    read as the kernel reads them: rows per the A map (a0, a2: g; a1, a3: g+8), k at physical_k."""
    g, c = lane // 4, lane % 4
    spots = ((g, physical_k(c, 0)), (g + 8, physical_k(c, 0)), (g, physical_k(c, 1)), (g + 8, physical_k(c, 1)))
    return [(act[row0 + r, k0 + k], act[row0 + r, k0 + k + 1]) for r, k in spots]


def emulated_mma_product(act, packed, n):
    """D [rows, n] = act . Op computed as the kernel does: per k-step, each lane's A registers
    (from act) and B registers (from the packed array) placed by the fragment maps into 16x16 and
    16x8 tiles, D accumulated in float64 and read back through the C map."""
    blocks, k_steps, _, two_nt = packed.shape
    n_tiles = two_nt // 2
    rows = -(-act.shape[0] // 16) * 16
    a_pad = np.zeros((rows, 16 * k_steps))
    a_pad[:act.shape[0], :act.shape[1]] = act
    halves = packed.view(np.uint16).reshape(packed.shape + (2,)).view(np.float16).astype(np.float64)
    out = np.zeros((rows, blocks * 8 * n_tiles))
    for cb in range(blocks):
        for mt in range(rows // 16):
            for nt in range(n_tiles):
                d = np.zeros((16, 8))
                for ks in range(k_steps):
                    a, b = np.zeros((16, 16)), np.zeros((16, 8))
                    for lane in range(32):
                        g, c = lane // 4, lane % 4
                        for (lo, hi), (r, k) in zip(_a_registers(a_pad, 16 * mt, 16 * ks, lane),
                                                    ((g, 2 * c), (g + 8, 2 * c), (g, 2 * c + 8), (g + 8, 2 * c + 8))):
                            a[r, k], a[r, k + 1] = lo, hi
                        for half in (0, 1):
                            b[8 * half + 2 * c: 8 * half + 2 * c + 2, g] = halves[cb, ks, lane, 2 * nt + half]
                    d += a @ b
                for lane in range(32):  # C map: c0, c1 = C[g][2c, 2c+1]; c2, c3 = C[g+8][2c, 2c+1]
                    g, c = lane // 4, lane % 4
                    col = cb * 8 * n_tiles + 8 * nt + 2 * c
                    out[16 * mt + g, col:col + 2] = d[g, 2 * c:2 * c + 2]
                    out[16 * mt + g + 8, col:col + 2] = d[g + 8, 2 * c:2 * c + 2]
    return out[:act.shape[0], :n]


@pytest.mark.parametrize("hidden,batch", [(100, 3), (40, 17)])
def test_emulated_mma_product_is_h_times_w_transposed(rng, hidden, batch):
    w = _interleaved_w(rng, hidden)
    h = rng.standard_normal((batch, hidden)).astype(np.float16).astype(np.float64)
    got = emulated_mma_product(h, pack_weights(w, Tile(1, 2, 2, False)), 4 * hidden)
    np.testing.assert_allclose(got, h @ w.astype(np.float64).T, rtol=1e-12, atol=1e-12)


def test_emulated_mma_backward_product_is_dz_times_w(rng):
    hidden, batch = 40, 5
    w = _interleaved_w(rng, hidden)
    dz = rng.standard_normal((batch, 4 * hidden)).astype(np.float16).astype(np.float64)
    got = emulated_mma_product(dz, pack_weights(w, Tile(1, 1, 2, True)), hidden)
    np.testing.assert_allclose(got, dz @ w.astype(np.float64), rtol=1e-12, atol=1e-12)


# ---- tile choice and size rule --------------------------------------------------------------

@pytest.mark.parametrize("hidden,batch", [(256, 128), (1024, 64), (256, 16), (100, 3), (2048, 16), (512, 256)])
@pytest.mark.parametrize("backward", [False, True])
def test_tiles_fill_the_gpu_within_limits(hidden, batch, backward):
    tile = choose_tile(batch, hidden, backward, sm_count=132)
    cols, rows = tile.grid(batch, hidden)
    assert cols * tile.units >= hidden and rows * tile.rows >= batch
    assert tile.smem_bytes() <= fused_mma.DEFAULT_SMEM_PER_BLOCK
    assert tile.m_tiles // tile.m_warps * tile.n_tiles * 4 <= 64  # accumulator registers per thread
    assert tile.threads <= 32 * fused_mma.MAX_WARPS
    if hidden * batch >= 256 * 128:
        assert cols * rows >= 0.9 * 132


def test_row_split_tiles():
    """v3.1: 64-row forward tiles split their rows over 2 warp groups (one load round a warp);
    the 16/32-row tiles and the backward keep v3's warps."""
    tile = choose_tile(64, 512, False, sm_count=132)
    assert (tile.m_tiles, tile.n_tiles, tile.warps, tile.m_warps) == (4, 2, 16, 2)
    assert tile.k_warps == 8 and tile.threads == 512 and tile.grid(64, 512) == (128, 1)
    # B >= 128: 32 rows x twice the units, one m-tile a warp (measured faster at H=256 B=128)
    wide = choose_tile(128, 256, False, sm_count=132)
    assert wide == Tile(2, 4, 8, False, 2) and wide.grid(128, 256) == (32, 4)
    tile = Tile(4, 2, 8, False, 2)
    assert tile.smem_bytes() == 4 * 64 * (16 + 8) * 4   # one partial tile per K-slice, not per warp
    assert tile.defines("float16")["M_WARPS"] == 2 and tile.describe() == "fwd 64x4u/8w(2x4)"
    assert choose_tile(64, 256, False, sm_count=132) == Tile(2, 2, 4, False)   # v3's tile
    assert choose_tile(16, 256, False, sm_count=132) == Tile(1, 2, 4, False)
    assert choose_tile(16, 1024, False, sm_count=132) == Tile(1, 4, 16, False)
    assert choose_tile(128, 256, True, sm_count=132).m_warps == 1
    assert Tile(4, 2, 4, False).m_warps == 1 and Tile(4, 2, 4, False).k_warps == 4
    with pytest.raises(ValueError):
        Tile(4, 2, 8, False, 3)
    with pytest.raises(ValueError):
        Tile(1, 2, 8, False, 2)   # more row groups than m-tiles


def kernel_partition(tile, k):
    """(row0, K-slice, k-step range) of every warp, as block_product computes them."""
    steps = -(-k // 16)
    per_warp = -(-steps // tile.k_warps)
    out = []
    for warp in range(tile.warps):
        kw = warp if tile.m_warps == 1 else warp % tile.k_warps
        row0 = 0 if tile.m_warps == 1 else 16 * (tile.m_tiles // tile.m_warps) * (warp // tile.k_warps)
        ks0 = min(steps, kw * per_warp)
        out.append((row0, kw, range(ks0, min(steps, ks0 + per_warp))))
    return out


@pytest.mark.parametrize("hidden,batch", [(256, 128), (512, 64), (1024, 64), (256, 16), (100, 3), (40, 200)])
@pytest.mark.parametrize("backward", [False, True])
def test_warps_cover_each_tile_product_once(hidden, batch, backward):
    """Every (m-tile, k-step) of a block is computed by exactly one warp, K-slices are the same
    for every row group (so the sum over K-slices has v3's order), and the partials fit smem."""
    tile = choose_tile(batch, hidden, backward, sm_count=132)
    k = 4 * hidden if backward else hidden
    wm = tile.m_tiles // tile.m_warps
    seen = {}
    for row0, kw, ks in kernel_partition(tile, k):
        assert kw < tile.k_warps and row0 % 16 == 0 and row0 + 16 * wm <= tile.rows
        for mt in range(wm):
            for step in ks:
                key = (row0 // 16 + mt, step)
                assert key not in seen
                seen[key] = kw
        # the last float of this warp's partial tile lies inside the shared allocation
        assert ((kw * tile.rows + row0 + 16 * wm - 1) * (tile.cols + 8) + tile.cols) * 4 <= tile.smem_bytes()
    assert len(seen) == tile.m_tiles * -(-k // 16)
    for mt in range(tile.m_tiles):  # same K-slice of a k-step in every row group
        assert [seen[(mt, s)] for s in range(-(-k // 16))] == [seen[(0, s)] for s in range(-(-k // 16))]


def test_size_rule():
    from ecornn.engines.fused import FusedOptions
    cfg = LSTMConfig(input_size=256, hidden_size=256, batch=128, dtype="float16")
    assert mma_decision(cfg, FusedOptions())[0]
    assert not mma_decision(cfg.replace(dtype="float32"), FusedOptions())[0]
    assert not mma_decision(cfg, FusedOptions(epilogue=False))[0]
    assert not mma_decision(cfg, FusedOptions(interleave=False))[0]
    assert mma_decision(cfg.replace(hidden_size=1024, batch=16), FusedOptions())[0]
    assert not mma_decision(cfg.replace(hidden_size=1024, batch=64), FusedOptions())[0]
    assert not mma_decision(cfg.replace(batch=256), FusedOptions())[0]        # batch rule
    assert not mma_decision(cfg.replace(hidden_size=2048, batch=256), FusedOptions())[0]


# ---- the engine on the CPU emulator, mma step vs cuBLAS + pointwise ---------------------------

def _run(fused, cfg, weights, x, h0, c0, dy, **flags):
    fw = [LayerWeights(*(fake(a) for a in w)) for w in weights]
    with fused.using(poison=True, chunk=3, **flags):
        y, h_t, c_t, res = fused.forward(cfg, fake(x), fw, fake(h0), fake(c0), training=True)
        step_kernel = fused.last_step_kernel
        grads = fused.backward(res, fake(dy), fake(h0), fake(c0))
    return [np.array(a, np.float64) for a in (y, h_t, c_t) + tuple(grads[:3])], grads[3], step_kernel


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_emulated_epilogue_on_matches_off(monkeypatch, rng, dtype):
    cfg = LSTMConfig(input_size=9, hidden_size=100, num_layers=3, bidirectional=True, batch=3,
                     seq_len=4, dtype=dtype)
    weights = init_weights(cfg, seed=int(rng.integers(2**31)))
    x, h0, c0 = (to_dtype(rng.standard_normal(s), dtype) for s in
                 ((cfg.seq_len, cfg.batch, cfg.input_size), cfg.state_shape, cfg.state_shape))
    dy = to_dtype(rng.standard_normal((cfg.seq_len, cfg.batch, 2 * cfg.hidden_size)), dtype)
    with emulated(monkeypatch) as fused:
        on, grads_on, kernel_on = _run(fused, cfg, weights, x, h0, c0, dy)
        launches = sum(k.launches for k in mma_launches)
        off, grads_off, kernel_off = _run(fused, cfg, weights, x, h0, c0, dy, epilogue=False)
    assert kernel_on.startswith("mma step") and "epilogue off" in kernel_off
    # forward: every step of 6 (layer, direction) chains; backward: all but the first position
    assert launches == 6 * cfg.seq_len + 6 * (cfg.seq_len - 1)
    for a, b in zip(on, off):
        assert rel_err(a, b) <= 1e-2
    for g_on, g_off in zip(grads_on, grads_off):
        for a, b in zip(g_on, g_off):
            assert rel_err(np.asarray(a, np.float64), np.asarray(b, np.float64)) <= 1e-2


@pytest.mark.parametrize("prepared", [False, True])
def test_emulated_mma_graph_replays_match_reference(monkeypatch, rng, prepared):
    """Fresh weights each call: unprepared weights are re-packed in place under the captured graph,
    prepared ones are packed once in prepare()."""
    from .test_fused_cpu import _compare
    cfg = LSTMConfig(input_size=5, hidden_size=24, num_layers=2, bidirectional=True, batch=3,
                     seq_len=7, dtype="float16")
    with emulated(monkeypatch, graph=True) as fused, fused.using(chunk=3):
        for _ in range(3):  # eager + capture, then replays
            _compare(rng, fused, cfg, prepared=prepared)
        assert fused.last_step_kernel.startswith("mma step")


def test_emulated_row_split_tile_launches(monkeypatch, rng):
    """The engine launches the v3.1 row-split tile with its grid, 256 threads and one partial
    tile per K-slice of shared memory (the emulator asserts all three at every launch)."""
    cfg = LSTMConfig(input_size=30, hidden_size=244, batch=70, seq_len=3, dtype="float16")
    weights = init_weights(cfg, seed=int(rng.integers(2**31)))
    x, h0, c0 = (to_dtype(rng.standard_normal(s), "float16") for s in
                 ((cfg.seq_len, cfg.batch, cfg.input_size), cfg.state_shape, cfg.state_shape))
    dy = to_dtype(rng.standard_normal((cfg.seq_len, cfg.batch, cfg.hidden_size)), "float16")
    with emulated(monkeypatch) as fused:
        on, _, kernel_on = _run(fused, cfg, weights, x, h0, c0, dy)
        tiles = {k.tile for k in mma_launches if k.launches}
        off, _, _ = _run(fused, cfg, weights, x, h0, c0, dy, epilogue=False)
    assert "fwd 64x4u/8w(2x4)" in kernel_on
    assert Tile(4, 2, 8, False, 2) in tiles
    for a, b in zip(on, off):
        assert rel_err(a, b) <= 1e-2
