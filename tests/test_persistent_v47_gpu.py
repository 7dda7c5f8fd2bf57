"""`persistent` v47 on the GPU: batches run padded (persistent.run_config: zero columns added so that the kernels'
batch groups are equal): forward, final states and every gradient within tolerance of float64 (fp32 1e-5, 16-bit
1e-2; odd sizes, two layers bidirectional, one step, a long sequence, a batch that does not plan unpadded), dropout
masks as the reference draws them, bitwise reruns, inference and training graph
replays."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.arrays import to_module
from ecornn.engines import persistent, persistent_graph
from tests.helpers import rel_err
from tests.test_persistent_gpu import (FP32_TOL, HALF_TOL, _assert_bitwise_reruns, _assert_graph_replays_match_float64,
                                       _compare)
from tests.test_persistent_v9_gpu import _bitwise_equal, _eager, _gpu_problem, _prepared, _reference, _sets, _train

pytestmark = pytest.mark.gpu


def _assert_padded(config, training=True):
    """The call runs at a larger batch whose built plans split it into groups that cover it exactly."""
    wide = persistent.run_config(config, training)
    assert wide.batch > config.batch
    plans = persistent._built_plans(wide, training, "auto")
    for name, plan in plans.items():
        plan = persistent._final(plan)
        if plan.kind in ("mma", "grid") and plan.batch_groups > 1:
            assert plan.batch * plan.batch_groups == wide.batch, (name, plan.describe())
    assert any(getattr(persistent._final(p), "batch_groups", 1) > 1 for p in plans.values())
    return wide


# (input, hidden, layers, bidirectional, dtype, batch, steps)
PADDED_CONFIGS = [
    (1024, 1024, 1, False, "float16", 13, 20),    # 14 columns: 2 groups of 7
    (1024, 1024, 1, False, "bfloat16", 9, 17),
    (200, 1000, 1, False, "float16", 11, 15),     # odd hidden, input columns padded
    (64, 256, 2, True, "bfloat16", 7, 12),        # two layers, two directions: 8 as two groups of 4
    (512, 512, 1, False, "float16", 15, 300),     # a long sequence
    (48, 128, 1, False, "float16", 9, 1),         # one step
    (256, 256, 1, False, "float32", 7, 20),       # the fp32 split's groups of 2
    (100, 300, 2, True, "float32", 5, 9),
    (512, 512, 1, False, "float32", 3, 33),
    (1024, 1024, 1, False, "float16", 27, 10),    # does not plan (training) unpadded; 28 does
]


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps", PADDED_CONFIGS)
def test_padded_batches_train_within_tolerance_of_float64(rng, inp, hidden, layers, bidir, dtype, batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    _assert_padded(config)
    _compare(rng, config, FP32_TOL if dtype == "float32" else HALF_TOL)


def test_the_unpadded_b27_training_does_not_plan():
    config = LSTMConfig(1024, 1024, 1, False, "float16", 27, 10)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(persistent, "BATCH_PADDING", False)
        with pytest.raises(persistent.NotSupported):
            persistent.check(config, training=True)


@pytest.mark.parametrize("dtype, batch", [("float16", 13), ("float32", 7)])
def test_padded_dropout_matches_the_reference_with_the_same_seed(rng, dtype, batch):
    """Two layers with dropout: the masks are drawn for the caller's columns, as the reference draws them (other
    masks would put the outputs far outside the tolerance)."""
    config = LSTMConfig(128, 256, 2, False, dtype, batch, 16)
    _assert_padded(config)
    _compare(rng, config, FP32_TOL if dtype == "float32" else HALF_TOL, dropout=0.3)


@pytest.mark.parametrize("dtype, batch", [("float16", 11), ("float32", 5)])
def test_padded_batches_rerun_bitwise(rng, dtype, batch):
    config = LSTMConfig(512, 512, 1, False, dtype, batch, 25)
    _assert_padded(config)
    _assert_bitwise_reruns(rng, config)


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 13), ("bfloat16", 512, 9), ("float32", 256, 7)])
def test_padded_batches_replay_from_graphs_within_tolerance(rng, dtype, hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 33)
    _assert_padded(config, training=False)
    _assert_graph_replays_match_float64(rng, config, "mma", FP32_TOL if dtype == "float32" else HALF_TOL)


@pytest.mark.parametrize("dtype, hidden, batch", [("float16", 1024, 15), ("float32", 300, 7)])
def test_padded_training_replays_match_reference_and_eager(rng, monkeypatch, dtype, hidden, batch):
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 21)
    _assert_padded(config)
    weights, prepared = _prepared(rng, config)
    problems = [_gpu_problem(rng, config) for _ in range(3)]
    runs = [_train(prepared, p, config) for p in problems]
    assert not persistent_graph.capture_errors, persistent_graph.capture_errors
    assert len(_sets(prepared)) == 1
    tol = FP32_TOL if dtype == "float32" else HALF_TOL
    for problem, (out, got) in zip(problems, runs):
        assert out.y.shape == config.output_shape and got[3].shape == config.input_shape
        for g, e in zip(got, _eager(prepared, problem, config, monkeypatch)):
            assert _bitwise_equal(g, e)
        errors = [rel_err(np.asarray(to_module(g, np), np.float64), w)
                  for g, w in zip(got, _reference(weights, problem, config))]
        assert max(errors) <= tol, errors


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_batch_transforms_on_cupy_match_numpy(rng, dtype):
    """C-ordered arrays go by one strided 2-D memcpy, others (a transposed view) elementwise: the same values."""
    import cupy as cp
    from ecornn.layouts import first_columns, pad_columns
    a = rng.standard_normal((7, 5, 33)).astype(dtype)
    for source in (cp.asarray(a), cp.asarray(a.transpose(1, 0, 2).copy()).transpose(1, 0, 2)):
        padded = pad_columns(source, 8)
        assert np.array_equal(cp.asnumpy(padded), pad_columns(a, 8))
        out = cp.full((7, 5, 33), np.nan, dtype)
        assert np.array_equal(cp.asnumpy(first_columns(padded, 5, out=out)), a)
        assert np.array_equal(cp.asnumpy(first_columns(padded, 3)), a[:, :3])
