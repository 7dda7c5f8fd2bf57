"""Layout transforms: exact round trips, and the math commutes with them."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ecornn import LSTMConfig, LayerWeights, lstm_forward
from ecornn.layouts import (block_tiles, gate_deinterleave, gate_deinterleave_as, gate_deinterleave_copy,
                            gate_interleave, interleaved_permutation, unblock_tiles)
from ecornn.engines.reference import sigmoid
from tests.helpers import random_problem, rel_err

sizes = st.integers(min_value=1, max_value=17)


@settings(max_examples=60, deadline=None)
@given(hidden=sizes, cols=st.integers(0, 9), seed=st.integers(0, 2**31 - 1))
def test_interleave_round_trip(hidden, cols, seed):
    rng = np.random.default_rng(seed)
    shape = (4 * hidden,) + ((cols,) if cols else ())
    a = rng.standard_normal(shape)
    b = gate_interleave(a, hidden)
    assert np.array_equal(gate_deinterleave(b, hidden), a)
    assert np.array_equal(b, a[interleaved_permutation(hidden)])
    if hidden > 1:  # unit j's four gates are adjacent
        j = hidden - 1
        assert np.array_equal(b[4 * j:4 * j + 4], a[[j, hidden + j, 2 * hidden + j, 3 * hidden + j]])


@settings(max_examples=30, deadline=None)
@given(hidden=sizes, cols=st.integers(0, 9), seed=st.integers(0, 2**31 - 1))
def test_deinterleave_as_casts_in_one_copy(hidden, cols, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((4 * hidden,) + ((cols,) if cols else ())).astype(np.float32)
    for dtype in (np.float32, np.float16):
        got = gate_deinterleave_as(a, hidden, dtype)
        assert got.dtype == dtype and got.flags.c_contiguous and not np.shares_memory(got, a)
        assert np.array_equal(got, gate_deinterleave(a, hidden).astype(dtype))


def test_deinterleave_copy_keeps_the_dtype_and_checks_the_rows():
    a = np.random.default_rng(0).standard_normal((12, 5)).astype(np.float16)
    got = gate_deinterleave_copy(a, 3)   # NumPy: the strided copy (CuPy 2-D: memcpys, GPU tests of v31)
    assert got.dtype == np.float16 and got.flags.c_contiguous and not np.shares_memory(got, a)
    assert np.array_equal(got, gate_deinterleave(a, 3))
    with np.testing.assert_raises_regex(ValueError, "expected 4\\*hidden = 16 rows, got 12"):
        gate_deinterleave_copy(a, 4)


@settings(max_examples=60, deadline=None)
@given(hidden=sizes, cols=st.integers(1, 9), units=st.integers(1, 8), seed=st.integers(0, 2**31 - 1))
def test_block_tiles_round_trip_and_padding(hidden, cols, units, seed):
    a = np.random.default_rng(seed).standard_normal((4 * hidden, cols))
    tiles = block_tiles(a, hidden, units)
    blocks = -(-hidden // units)
    assert tiles.shape == (blocks, 4 * units, cols)
    assert np.array_equal(unblock_tiles(tiles, hidden), a)
    assert not tiles.reshape(-1, cols)[4 * hidden:].any()  # padding rows are zero


@settings(max_examples=25, deadline=None)
@given(hidden=st.integers(1, 6), inp=st.integers(1, 5), batch=st.integers(1, 3), seed=st.integers(0, 2**31 - 1))
def test_interleaved_weights_give_the_same_step(hidden, inp, batch, seed):
    """One LSTM step computed from gate-interleaved weights (reading gate q of unit j at row 4j+q)
    equals the reference."""
    rng = np.random.default_rng(seed)
    config = LSTMConfig(inp, hidden, dtype="float64", batch=batch, seq_len=1)
    weights, x, h0, c0 = random_problem(rng, config)
    w = weights[0]
    wi, wh = gate_interleave(w.w_ih, hidden), gate_interleave(w.w_hh, hidden)
    bias = gate_interleave(w.b_ih + w.b_hh, hidden)
    z = (x[0] @ wi.T + h0[0] @ wh.T + bias).reshape(batch, hidden, 4)
    i, f, g, o = sigmoid(z[..., 0]), sigmoid(z[..., 1]), np.tanh(z[..., 2]), sigmoid(z[..., 3])
    c = f * c0[0] + i * g
    out = lstm_forward(x, weights, h0, c0, strategy="reference")
    assert rel_err(o * np.tanh(c), out.y[0]) < 1e-12


@settings(max_examples=20, deadline=None)
@given(hidden=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_permuting_hidden_units_permutes_outputs(hidden, seed):
    """Relabelling hidden units (rows of every gate block, columns of w_hh) permutes h and c alike:
    the reference commutes with the permutation."""
    rng = np.random.default_rng(seed)
    config = LSTMConfig(3, hidden, dtype="float64", batch=2, seq_len=4)
    weights, x, h0, c0 = random_problem(rng, config)
    perm = rng.permutation(hidden)
    rows = np.concatenate([q * hidden + perm for q in range(4)])
    w = weights[0]
    permuted = LayerWeights(w.w_ih[rows], w.w_hh[rows][:, perm], w.b_ih[rows], w.b_hh[rows])
    a = lstm_forward(x, weights, h0, c0, strategy="reference")
    b = lstm_forward(x, [permuted], h0[..., perm], c0[..., perm], strategy="reference")
    assert rel_err(b.y, a.y[..., perm]) < 1e-12 and rel_err(b.c, a.c[..., perm]) < 1e-12
