"""The cluster forward (kernels/persistent_cluster.cu) emulated in NumPy: the same packed tiles,
lane/warp index formulas, partial-sum layout red[warp][unit][b][gate], per-block double-buffered h
and the DSMEM push of every h_t into all blocks of the cluster. Blocks run one after the other
within a step, so a block that reads the buffer being filled (a parity bug) sees another block's
h_t instead of h_{t-1} and the comparison with the float64 reference fails. The engine runs on
NumPy around it (plans, tiles, input projection, reserve for the v2 backward)."""
import numpy as np
import pytest

from ecornn import LSTMConfig, LayerWeights
from ecornn.engines import persistent, persistent_capacity as cap
from ecornn.engines import reference
from tests.helpers import random_problem, rel_err
from tests.test_persistent_emulated import _emulated_launch


def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


def _partials(plan, tile, hvec):
    """red_s of one block: [warps, tile_rows / 4, B, 4] (block_partials)."""
    s = plan.tile_shape()
    lk = s.lane_k
    w, i, lane = np.meshgrid(np.arange(s.warps), np.arange(s.cols_per_lane), np.arange(32), indexing="ij")
    v = hvec[w * s.cols_per_lane * lk + i * lk + lane % lk]           # [W, I, 32, B]
    per_lane = np.einsum("wirl,wilb->wrlb", tile, v)                  # [W, RPL, 32, B]
    per_row = per_lane.reshape(s.warps, s.rows_per_lane, s.lane_rows, lk, -1).sum(axis=3)
    per_row = per_row.reshape(s.warps, s.tile_rows, -1)               # row = rl * lane_rows + r
    return per_row.reshape(s.warps, s.tile_rows // 4, 4, -1).transpose(0, 1, 3, 2)


def _gate_sums(red):
    z = np.zeros(red.shape[1:], red.dtype)
    for w in range(red.shape[0]):                                     # warps in order, as gate_sums
        z = z + red[w]
    return z


def emulate_cluster_forward(plan, args):
    tiles, xw, h0, c0, y, hT, cT, gates, cells, steps, hidden, units, ldy = args
    steps, hidden, units, C, B = int(steps), int(hidden), int(units), plan.cluster, plan.batch
    K = plan.tile_shape().padded_cols
    for d in range(plan.directions):
        hbuf = np.zeros((C, 2, K, B), np.float32)
        hbuf[:, 0, :hidden] = h0[d].T
        cell = np.zeros((C, units, B), np.float32)
        for rank in range(C):
            js = rank * units + np.arange(units)
            cell[rank, js < hidden] = c0[d][:, js[js < hidden]].T
        for step in range(steps):
            t = steps - 1 - step if d == 1 else step
            cur, nxt = step & 1, (step + 1) & 1
            for rank in range(C):
                z = _gate_sums(_partials(plan, tiles[d, rank], hbuf[rank, cur]))[:units]   # [U, B, 4]
                js = rank * units + np.arange(units)
                own = js < hidden
                js, z = js[own], z[own]
                xz = xw[d, t].reshape(B, hidden, 4)[:, js].transpose(1, 0, 2)
                a = z + xz
                gi, gf, gg, go = _sig(a[..., 0]), _sig(a[..., 1]), np.tanh(a[..., 2]), _sig(a[..., 3])
                c = gf * cell[rank, own] + gi * gg
                cell[rank, own] = c
                h = go * np.tanh(c)                                   # [U_own, B]
                hbuf[:, nxt, js] = h                                  # push into every block
                y[t][:, d * hidden + js] = h.T
                if not isinstance(gates, np.uint64):
                    g = gates[d, t].reshape(B, hidden, 4)
                    g[:, js] = np.stack([gi, gf, gg, go], axis=-1).transpose(1, 0, 2)
                    cells[d, t][:, js] = c.T
                if step == steps - 1:
                    hT[d][:, js], cT[d][:, js] = h.T, c.T
            assert (hbuf[:, nxt] == hbuf[0, nxt]).all()               # every block holds all of h_t
            assert not hbuf[:, :, hidden:].any()                      # padding never written


@pytest.fixture
def cpu_engine(monkeypatch):
    monkeypatch.setattr(persistent, "_cp", lambda: np)
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)
    monkeypatch.setattr(persistent, "_device_id", lambda: 0)
    monkeypatch.setattr(persistent, "_cluster_kernel", lambda plan, device: (plan, None))
    monkeypatch.setattr(persistent, "_build", lambda plans: None)
    monkeypatch.setattr(persistent, "_launch", _emulated_launch)
    monkeypatch.setattr(persistent, "_launch_cluster", emulate_cluster_forward)
    return persistent


def _reference(config, x, weights, h0, c0, training=False):
    w64 = [LayerWeights(*(a.astype(np.float64) for a in w)) for w in weights]
    return reference.forward(config.replace(dtype="float64"), x.astype(np.float64), w64, h0.astype(np.float64),
                             c0.astype(np.float64), training=training, dropout=0.0, rng=np.random.default_rng(0))


CONFIGS = [  # (input, hidden, layers, bidirectional, batch, steps)
    (7, 5, 1, False, 1, 1),        # fewer units than blocks: idle blocks
    (37, 100, 1, False, 3, 9),     # H % cluster != 0, odd batch
    (30, 32, 2, True, 4, 7),
    (16, 256, 1, True, 1, 3),
    (16, 512, 1, False, 4, 2),     # cluster of 16, shared-memory weight columns
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, batch, steps", CONFIGS)
def test_emulated_cluster_forward_matches_reference(cpu_engine, rng, inp, hidden, layers, bidir, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, "float32", batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    got = cpu_engine.forward(config, x, weights, h0, c0, variant="cluster")
    want = _reference(config, x, weights, h0, c0)
    for g, w in zip(got[:3], want[:3]):
        assert rel_err(g, w) <= 1e-5


def test_training_cluster_forward_feeds_the_v2_backward(cpu_engine, rng):
    config = LSTMConfig(20, 48, 2, True, "float32", 3, 6)
    weights, x, h0, c0 = random_problem(rng, config)
    dy = rng.standard_normal(config.output_shape).astype(np.float32)
    dh, dc = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    got = cpu_engine.forward(config, x, weights, h0, c0, training=True, variant="cluster")
    assert got[3].plans["forward"].cluster == 8 and got[3].plans["backward"].pass_name == "backward"
    grads = cpu_engine.backward(got[3], dy, dh, dc)
    want = _reference(config, x, weights, h0, c0, training=True)
    want_grads = reference.backward(want[3], dy.astype(np.float64), dh.astype(np.float64), dc.astype(np.float64))
    for g, w in zip(list(got[:3]) + list(grads[:3]), list(want[:3]) + list(want_grads[:3])):
        assert rel_err(g, w) <= 1e-5
    for gw, ww in zip(grads[3], want_grads[3]):
        for g, w in zip(gw, ww):
            assert rel_err(g, w) <= 1e-5


def test_variant_choice(cpu_engine, monkeypatch):
    config = LSTMConfig(8, 64, 1, False, "float32", 2, 3)
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", False)
    assert persistent._cluster_choice(config, False, "auto") is None          # CLUSTER_DEFAULT off
    assert persistent._cluster_choice(config, False, "grid") is None
    assert persistent._cluster_choice(config, False, "cluster").cluster == 8
    monkeypatch.setattr(persistent, "CLUSTER_DEFAULT", True)
    assert persistent._cluster_choice(config, False, "auto").cluster == 8
    assert persistent._cluster_choice(config, True, "auto") is None           # training stays v2
    h512 = LSTMConfig(8, 512, 1, False, "float32", 4, 3)
    assert persistent._cluster_choice(h512, False, "auto") is None            # 16 blocks: grid is faster
    assert persistent._cluster_choice(h512, False, "cluster").cluster == 16
    big = LSTMConfig(8, 1024, 1, False, "float32", 4, 3)
    assert persistent._cluster_choice(big, False, "auto") is None             # falls back to the grid
    with pytest.raises(persistent.NotSupported, match="hidden_size=1024"):
        persistent._cluster_choice(big, False, "cluster")
    with pytest.raises(ValueError, match="variant"):
        persistent._cluster_choice(config, False, "fastest")
