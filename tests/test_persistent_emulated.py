"""The persistent engine on the CPU: NumPy stands in for CuPy and a NumPy emulation of
kernels/persistent_lstm.cu (same packed tiles, lane/warp index formulas and step order) stands in
for the GPU launch. Checks the engine's Python side (plans, tile packing, input projection,
reserve, dropout, gradient GEMMs) and the kernel's index arithmetic against the float64 reference
without a GPU; tests/test_persistent_gpu.py checks the real kernels."""
import ml_dtypes
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent, persistent_capacity as cap
from ecornn.engines import reference
from tests.helpers import random_problem, rel_err


def _block_sums(plan, tiles, vec, shape=None):
    """What block_matvec leaves in sums_s for every block: [blocks, tile_rows, B] (``shape``: the
    tiles' TileShape, plan.tile_shape() by default)."""
    shape = shape or plan.tile_shape()
    lk, kw = shape.lane_k, shape.cols_per_lane * shape.lane_k
    w, i, lane = np.meshgrid(np.arange(shape.warps), np.arange(shape.cols_per_lane), np.arange(32),
                             indexing="ij")
    cols = w * kw + i * lk + lane % lk                       # column of (warp, i, lane)
    v = vec[cols]                                            # [NW, KWL, 32, B]
    partial = np.einsum("nwirl,wilb->nrlb", tiles, v)        # per lane, summed over warps
    per_row = partial.reshape(tiles.shape[0], shape.rows_per_lane, shape.lane_rows, lk, -1).sum(axis=3)
    return per_row.reshape(tiles.shape[0], shape.tile_rows, -1)


def _own_rows(plan, sums, count):
    """Block-major rows actually owned ([count, B]), dropping the tile padding."""
    return sums[:, : plan.rows_per_unit * plan.units].reshape(-1, sums.shape[-1])[:count]


def _vector(src, padded):
    """[B, K] -> [padded K, B] zero padded, as load_vector + the zeroed padding leave vec_s."""
    vec = np.zeros((padded, src.shape[0]), np.float32)
    vec[: src.shape[1]] = src.T
    return vec


def _exchanged(plan, values, n):
    """What the blocks multiply after publication n (kernels/persistent_lstm.cu, v6): under the
    tagged exchange each float's lowest mantissa bit is replaced by the tag 1 ^ ((n >> 1) & 1). The
    tensor-core kernels' tags sit beside the 16-bit value (persistent_mma.cu): their values pass as
    they are (changing the fp32 bit would move a value that lies on a 16-bit rounding tie)."""
    if not plan.tagged or plan.kind == "mma":
        return values
    tag = np.uint32(1 ^ ((n >> 1) & 1))
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32)
    return ((bits & np.uint32(0xFFFFFFFE)) | tag).view(np.float32)


def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def emulate_forward(plan, args, dir0, bias=None, input_projection=None, unscale=None, xw_exponents=None):
    """``input_projection``: a function of the kernel's x argument that returns xw (the mma kernel's
    in-kernel projection, v12: args[1] is then the 16-bit layer input). ``unscale`` [D]: the fp32
    split's factors (v13): the product is scaled by them, and (v34, persistent.H0_IN_PRODUCT) h0 is
    exchanged scaled by 2^-e per batch column (h0_column_exponents) and the step-0 product brought back by
    2^e, or the kernel starts from h = 0 and args[2] is W_hh h0 [D, B, 4H], added at the first step (v32;
    v29's in-kernel projection before); [D, 2] (v29): W_hh's then W_ih's. ``xw_exponents`` (v32): xw as the
    fp16-split GEMM left it, brought back by 2^(row exponent [T B] + column exponent [D, 4H])."""
    tiles, xw, h0, c0, y, hT, cT, gates, cells, steps, hidden = args[:11]
    steps, hidden = int(steps), int(hidden)
    if input_projection is not None:
        xw = input_projection(xw)
    if xw_exponents is not None:
        row_exp, col_exp = xw_exponents
        xw = np.ldexp(xw, row_exp.reshape(1, xw.shape[1], xw.shape[2], 1) + col_exp.reshape(-1, 1, 1, xw.shape[3]))
    if bias is not None:   # the mma kernel adds the biases itself (xw comes without them)
        xw = xw + bias[:, None, None, :]
    h0_in_product = unscale is not None and persistent.H0_IN_PRODUCT and input_projection is None   # (v29: W_hh h0)
    if unscale is not None and not h0_in_product:   # a split forward: W_hh h0 in h0's place
        xw = xw.copy()
        for d in range(xw.shape[0]):
            xw[d, steps - 1 if d == 1 else 0] += h0[d]
    for d in range(dir0, dir0 + plan.directions_per_launch):
        c = c0[d].T.copy()                                   # [H, B]
        for step in range(steps):
            t = steps - 1 - step if d == 1 else step
            tp = t + 1 if d == 1 else t - 1
            h_prev = h0[d] if step == 0 else y[tp, :, d * hidden:(d + 1) * hidden]
            column_scale = np.ones((h_prev.shape[0], 1), np.float32)
            if step == 0 and h0_in_product:   # v34: h0 scaled into the split's range, the product scaled back
                exponents = h0_column_exponents(h0[d])
                h_prev, column_scale = np.ldexp(h0[d], -exponents[:, None]), np.ldexp(column_scale, exponents[:, None])
            elif step == 0 and unscale is not None:
                h_prev = np.zeros((h_prev.shape[0], hidden), np.float32)   # (h0 holds W_hh h0)
            sums = _block_sums(plan, tiles[d], _vector(_exchanged(plan, h_prev, step), plan.tile_shape().padded_cols))
            if unscale is not None:
                sums = sums * (unscale[d, 0] if np.ndim(unscale) == 2 else unscale[d])
            recurrent = _own_rows(plan, sums, 4 * hidden).T * column_scale
            z = recurrent.reshape(-1, hidden, 4) + xw[d, t].reshape(-1, hidden, 4)
            gi, gf, gg, go = _sig(z[..., 0]), _sig(z[..., 1]), np.tanh(z[..., 2]), _sig(z[..., 3])
            c = gf * c.T + gi * gg
            h = go * np.tanh(c)
            c = c.T
            y[t, :, d * hidden:(d + 1) * hidden] = h.astype(np.float32)   # fp32 first, as the kernel (v23: 16-bit y)
            if not isinstance(gates, np.uint64):
                gates[d, t] = np.stack([gi, gf, gg, go], axis=-1).reshape(gates.shape[2:])
                cells[d, t] = c.T
            if step == steps - 1:
                hT[d], cT[d] = h.astype(np.float32), c.T.astype(np.float32)


def h0_column_exponents(h0):
    """v34: per batch row of h0 [B, H], the split kernel's e: the largest biased exponent of a finite value less
    126 (0 where all are zero or subnormal), so h0 * 2^-e has its largest magnitude in [0.5, 1)."""
    biased = (np.ascontiguousarray(h0, np.float32).view(np.uint32) >> 23) & 0xff
    top = np.where(biased == 0xff, 0, biased).max(axis=1).astype(np.int64)
    return np.where(top == 0, 0, top - 126)


def _pointwise_backward(gates, cells, c_prev, dh, dc_next, hidden):
    """(dz [B, 4H] gate-interleaved, dc for the step before) of one step, as both backward kernels."""
    g = gates.reshape(-1, hidden, 4)
    gi, gf, gg, go = g[..., 0], g[..., 1], g[..., 2], g[..., 3]
    tc = np.tanh(cells)
    dc = dh * go * (1 - tc * tc) + dc_next
    parts = [dc * gg * gi * (1 - gi), dc * c_prev * gf * (1 - gf), dc * gi * (1 - gg * gg), dh * tc * go * (1 - go)]
    return np.stack(parts, axis=-1).reshape(g.shape[0], -1), dc * gf


def _store_dz(dz, d, t, values):
    """dz[d, t] as the kernel stores it: fp32, or (v30, dz16) 16-bit values rounded to nearest even,
    bf16 as its uint16 storage words."""
    if dz.dtype == np.uint16:
        dz[d, t] = np.asarray(values, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    else:
        dz[d, t] = values


def _dy_values(dy, dy16):
    """dy as the mma backward reads it: fp32, or (v31, dy16) the layer's 16-bit storage words."""
    if not dy16:
        assert np.dtype(dy.dtype) == np.float32
        return dy
    assert np.dtype(dy.dtype).itemsize == 2
    return (dy.view(ml_dtypes.bfloat16) if dy.dtype == np.uint16 else dy).astype(np.float32)


def emulate_backward(plan, args, dir0, dy16=False):
    tiles, dy, gates, cells, c0, dhT, dcT, dz, dh0, dc0, steps, hidden = args[:12]
    steps, hidden = int(steps), int(hidden)
    dy = _dy_values(dy, dy16)
    for d in range(dir0, dir0 + plan.directions_per_launch):
        dh_next, dc_next = dhT[d].copy(), dcT[d].copy()      # [B, H]
        for step in range(steps - 1, -1, -1):
            t = steps - 1 - step if d == 1 else step
            tp = t + 1 if d == 1 else t - 1
            c_prev = c0[d] if step == 0 else cells[d, tp]
            dz_t, dc_next = _pointwise_backward(gates[d, t], cells[d, t], c_prev,
                                                dy[t, :, d * hidden:(d + 1) * hidden] + dh_next, dc_next, hidden)
            _store_dz(dz, d, t, dz_t)
            exchanged = _exchanged(plan, dz_t, steps - 1 - step)
            sums = _block_sums(plan, tiles[d], _vector(exchanged, plan.tile_shape().padded_cols))
            dh_next = _own_rows(plan, sums, hidden).T
        dh0[d], dc0[d] = dh_next, dc_next


def emulate_backward_rows(plan, args, dir0):
    """kernels/persistent_bwd_rows.cu: each block's rows (from the packed column tiles) times its
    own units' dz, the blocks' partials summed by the owners."""
    tiles, dy, gates, cells, c0, dhT, dcT, dz, dh0, dc0, steps, hidden = args[:12]
    steps, hidden = int(steps), int(hidden)
    s = plan.tile_shape()
    for d in range(dir0, dir0 + plan.directions_per_launch):
        rows = tiles[d].transpose(0, 2, 1, 3).reshape(s.blocks, s.rows_per_block, s.padded_cols)
        dh_next, dc_next = dhT[d].copy(), dcT[d].copy()
        for step in range(steps - 1, -1, -1):
            t = steps - 1 - step if d == 1 else step
            c_prev = c0[d] if step == 0 else cells[d, t + 1 if d == 1 else t - 1]
            dz[d, t], dc_next = _pointwise_backward(gates[d, t], cells[d, t], c_prev,
                                                    dy[t, :, d * hidden:(d + 1) * hidden] + dh_next, dc_next, hidden)
            own = np.zeros((s.blocks * s.rows_per_block, dz.shape[2]), np.float32)
            own[: 4 * hidden] = dz[d, t].T                                       # [4H, B] gate rows
            partials = np.einsum("bgk,bgn->bkn", rows, own.reshape(s.blocks, s.rows_per_block, -1))
            dh_next = partials.sum(axis=0)[:hidden].T
        dh0[d], dc0[d] = dh_next, dc_next


def grid_input_projection(plan, x, input_tiles):
    """[D, T, B, 4H] x W_ih^T (no bias) as the grid forward's in-kernel projection (v15) computes it:
    the packed W_ih tiles (plan.input_tile_shape()) times x_t staged [k][b], zero padded."""
    shape = plan.input_tile_shape()
    per_dir = []
    for tiles in input_tiles:
        steps = [_own_rows(plan, _block_sums(plan, tiles, _vector(x_t, shape.padded_cols), shape), 4 * plan.hidden).T
                 for x_t in x]
        per_dir.append(np.stack(steps))
    return np.stack(per_dir)


input_projection_emulator = None   # (plan, x16, input_tiles) -> xw: set by the mma emulation tests
split_input_emulator = None   # v29: (plan, x split, input_tiles, input size, unscale, steps) -> xw: likewise


def _emulated_launch(plan, args, directions=1, bias=None, input_tiles=None, input_size=0, unscale=None, x_at=None,
                     out16=False, states16=False, dz16=False, dy16=False, xw_exponents=None, xw_part=None):
    assert x_at is None   # v21's x by reference exists in captured graphs only (GPU)
    # v32: the split forward, v33: the grid forward that adds its biases; never with an in-kernel projection
    assert xw_exponents is None or (input_tiles is None and plan.pass_name == "forward" and (
        (plan.kind == "mma" and plan.parts == 2) or (plan.kind == "grid" and plan.kernel_bias and bias is not None)))
    # v23: 16-bit outputs (y, hT, cT) exactly where the engine asks the kernel for them; the
    # emulation's stores into them round as the kernel's do (to nearest even)
    assert bool(out16) == (np.dtype(args[4].dtype) != np.float32) == (np.dtype(args[5].dtype) != np.float32)
    assert not out16 or (plan.kind == "mma" and plan.pass_name == "forward")
    assert bool(states16) == (np.dtype(args[2].dtype) != np.float32) == (np.dtype(args[3].dtype) != np.float32)
    assert not states16 or out16
    if plan.pass_name == "backward":   # v30: the mma backward stores 16-bit dz exactly where the engine asks
        assert bool(dz16) == (np.dtype(args[7].dtype).itemsize == 2) and (not dz16 or plan.kind == "mma")
        assert not dy16 or dz16   # v31: only the mma backward reads 16-bit dy
    for launch in range(plan.launches):
        if plan.kind == "rows":
            emulate_backward_rows(plan, args, launch)
        elif plan.pass_name == "forward":
            project = None
            if input_tiles is not None and plan.kind == "mma" and plan.parts == 2:   # v29: a flat split buffer
                project = lambda x: split_input_emulator(plan, x, input_tiles, input_size, unscale,  # noqa: E731
                                                         int(args[9]))
            elif input_tiles is not None and getattr(plan, "input_part", False):   # v51: the kernel's share + the GEMM's
                assert input_size == args[1].shape[-1] and xw_part.shape[1:3] == args[1].shape[:2]
                project = lambda x: (input_projection_emulator(plan, x[..., :plan.input_part_from], input_tiles)  # noqa: E731
                                     + xw_part)
            elif input_tiles is not None:
                assert input_size == args[1].shape[-1] and xw_part is None
                emulator = grid_input_projection if plan.kind == "grid" else input_projection_emulator
                project = lambda x: emulator(plan, x, input_tiles)  # noqa: E731
            emulate_forward(plan, args, launch, bias, project, unscale, xw_exponents)
        else:
            emulate_backward(plan, args, launch, dy16)


@pytest.fixture
def cpu_engine(monkeypatch):
    monkeypatch.setattr(persistent, "_cp", lambda: np)
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "_build", lambda plans: None)
    monkeypatch.setattr(persistent, "_launch", _emulated_launch)
    monkeypatch.setattr(persistent, "_final", lambda plan: plan)   # as planned: nothing is compiled
    monkeypatch.setattr(persistent, "FP32_TENSOR_CORES", False)   # the fp32 kernels (v13's split: its own tests)
    return persistent


CONFIGS = [  # (input, hidden, layers, bidirectional, batch, steps)
    (7, 5, 1, False, 1, 1),
    (37, 100, 1, False, 3, 9),
    (20, 1000, 1, False, 2, 3),
    (30, 64, 3, True, 3, 7),
    (16, 1536, 1, True, 1, 2),
    (24, 200, 2, True, 4, 5),
    (10, 1000, 1, False, 8, 3),
    (12, 1024, 1, False, 16, 2),   # the rows backward (v7): the grid backward does not fit ...
    (12, 1024, 1, False, 4, 2),    # ... and where it measured faster
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", CONFIGS)
def test_engine_with_emulated_kernels_matches_reference(cpu_engine, rng, inp, hidden, layers, bidir, batch, steps):
    """Every CONFIG, and under BACKWARD_BY_ROWS=True the rows backward for all of them (test below)."""
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    dropout = 0.25 if layers > 1 else 0.0
    got = cpu_engine.forward(config, x, weights, h0, c0, training=True, dropout=dropout,
                             rng=np.random.default_rng(3))
    got_grads = cpu_engine.backward(got[3], dy, dh, dc)
    w64 = [LayerWeights(*(a.astype(np.float64) for a in w)) for w in weights]
    want = reference.forward(config.replace(dtype="float64"), x.astype(np.float64), w64, h0.astype(np.float64),
                             c0.astype(np.float64), training=True, dropout=dropout, rng=np.random.default_rng(3))
    want_grads = reference.backward(want[3], dy.astype(np.float64), dh.astype(np.float64), dc.astype(np.float64))
    for g, w in zip(got[:3], want[:3]):
        assert rel_err(g, w) <= 1e-5
    for g, w in zip(got_grads[:3], want_grads[:3]):
        assert rel_err(g, w) <= 1e-5
    for gw, ww in zip(got_grads[3], want_grads[3]):
        for g, w in zip(gw, ww):
            assert rel_err(g, w) <= 1e-5
    assert cpu_engine.last_kinds["backward"] == ("rows" if hidden >= 1024 and batch >= 4 else "grid")


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", CONFIGS[:4] + CONFIGS[5:6])
def test_rows_backward_emulated_matches_reference(cpu_engine, monkeypatch, rng, inp, hidden, layers, bidir, batch, steps):
    monkeypatch.setattr(cpu_engine, "BACKWARD_BY_ROWS", True)
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    got = cpu_engine.forward(config, x, weights, h0, c0, training=True)
    grads = cpu_engine.backward(got[3], dy, np.zeros(config.state_shape, np.float32), np.zeros(config.state_shape, np.float32))
    assert cpu_engine.last_kinds["backward"] == "rows"
    want = reference.forward(config.replace(dtype="float64"), x.astype(np.float64),
                             [LayerWeights(*(a.astype(np.float64) for a in w)) for w in weights],
                             h0.astype(np.float64), c0.astype(np.float64), training=True)
    zeros = np.zeros(config.state_shape)
    want_grads = reference.backward(want[3], dy.astype(np.float64), zeros, zeros)
    for g, w in zip(grads[:3], want_grads[:3]):
        assert rel_err(g, w) <= 1e-5
    for gw, ww in zip(grads[3], want_grads[3]):
        for g, w in zip(gw, ww):
            assert rel_err(g, w) <= 1e-5


def test_check_covers_backward_only_when_training(cpu_engine):
    from ecornn import NotSupported
    config = LSTMConfig(1600, 1600, 1, False, "float32", 4, 8)   # forward fits; no backward kernel does
    cpu_engine.check(config)
    with pytest.raises(NotSupported, match="backward"):
        cpu_engine.check(config, training=True)
    with pytest.raises(NotSupported, match="backward"):  # before anything runs
        cpu_engine.forward(config, np.zeros(config.input_shape, np.float32), None, None, None, training=True)


def test_plans_that_do_not_build_fall_back_in_order(cpu_engine, monkeypatch):
    """_built_plans: a rows backward that does not build (spills) gives way to the grid backward;
    where that cannot hold the batch either, the first error is the one raised (ungrouped: v41's grid backward holds
    H=1024 B=16 in two batch groups, below)."""
    from ecornn import NotSupported

    def build(plans):
        if any(p.kind == "rows" for p in plans.values()):
            raise NotSupported(persistent.name, "rows kernel spills (stand-in)")
    monkeypatch.setattr(cpu_engine, "_build", build)
    grouped = cpu_engine._built_plans(LSTMConfig(1024, 1024, 1, False, "float32", 16, 2), True, "auto")["backward"]
    assert (grouped.kind, grouped.batch_groups) == ("grid", 2)
    monkeypatch.setattr(cpu_engine, "BACKWARD_GROUPS", False)
    fits = LSTMConfig(1024, 1024, 1, False, "float32", 8, 2)      # rows by the rule, grid fits too
    assert cpu_engine._built_plans(fits, True, "auto")["backward"].kind == "grid"
    no_grid = fits.replace(batch=16)                                # only the rows backward fits
    with pytest.raises(NotSupported, match="rows kernel spills"):
        cpu_engine._built_plans(no_grid, True, "auto")
    monkeypatch.setattr(cpu_engine, "_build", lambda plans: None)
    assert cpu_engine._built_plans(no_grid, True, "auto")["backward"].kind == "rows"


def test_kernel_builds_remember_not_supported():
    """A plan that does not build is not compiled again on the next call (fallback configs)."""
    from ecornn import NotSupported
    calls = []

    def build(plan, device_id):
        calls.append(plan)
        if plan == "spills":
            raise NotSupported(persistent.name, "spills (stand-in)")
        return plan, "kernel"
    cached = persistent._remembered(build)
    for _ in range(3):
        with pytest.raises(NotSupported, match="spills"):
            cached("spills", 0)
        assert cached("fits", 0) == ("fits", "kernel")
    assert calls == ["spills", "fits"]
