"""`persistent` v55 on the GPU: a sleep after every incomplete poll of the tagged exchange (POLL_BACKOFF_NS, kernel
define of the same name; rules.poll_backoff_ns: the fp32 paired split at H=1024 B=4), in the tensor-core forwards. Forward, final states and every gradient within
tolerance of float64 (fp32 splits clustered and paired, 16-bit grouped and with the input projection, odd sizes, two
layers bidirectional, T=1) and bitwise the default's (the data polled are the same); graph replays."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.helpers import random_problem
from tests.test_persistent_gpu import (FP32_TOL, HALF_TOL, NAMES, _assert_graph_replays_match_float64, _compare,
                                       _gradient_seeds, _run)

pytestmark = pytest.mark.gpu

# (input, hidden, layers, bidirectional, dtype, batch, steps)
CONFIGS = [
    (1024, 1024, 1, False, "float32", 8, 21),     # the split on clusters of 2, after an 800-cycle spin
    (1024, 1024, 1, False, "float32", 4, 17),     # the paired split, after a 400 ns sleep
    (1024, 1024, 1, False, "float16", 16, 19),    # two batch groups, the input projection in the kernel
    (1024, 1024, 1, False, "bfloat16", 4, 15),    # v51's split projection
    (1000, 1000, 1, False, "float32", 3, 13),     # odd sizes
    (256, 256, 2, True, "bfloat16", 5, 11),
    (100, 100, 1, False, "float16", 1, 1),
]


def _tol(dtype):
    return FP32_TOL if dtype == "float32" else HALF_TOL


def _tagged_forward(config):
    return persistent._final(persistent._built_plans(persistent.run_config(config, True), True, "auto")["forward"])


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps", CONFIGS)
def test_backoff_polls_train_within_tolerance_of_float64(rng, monkeypatch, inp, hidden, layers, bidir, dtype,
                                                              batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    monkeypatch.setattr(persistent, "POLL_BACKOFF_NS", 200)
    forward = _tagged_forward(config)
    if forward.kind == "mma" and forward.tagged:   # (the FFMA grid kernel, H=1000 B=3, polls as before)
        assert forward.defines()["POLL_BACKOFF_NS"] == 200, forward.describe()
    _compare(rng, config, _tol(dtype))


@pytest.mark.parametrize("inp, hidden, layers, bidir, dtype, batch, steps", CONFIGS)
def test_backoff_polls_give_the_bits_of_polling_at_once(rng, monkeypatch, inp, hidden, layers, bidir, dtype,
                                                                 batch, steps):
    config = LSTMConfig(inp, hidden, layers, bidir, dtype, batch, steps)
    weights, x, h0, c0 = random_problem(rng, config)
    seeds = _gradient_seeds(rng, config, config.dtype)
    monkeypatch.setattr(persistent, "POLL_BACKOFF_NS", 0)
    at_once = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    monkeypatch.setattr(persistent, "POLL_BACKOFF_NS", 100)
    backoff = _run("persistent", x, weights, h0, c0, *seeds, config.bidirectional)
    for name, a, b in zip(NAMES + ["dW"] * 99, backoff, at_once):
        assert np.array_equal(np.asarray(a), np.asarray(b)), name


@pytest.mark.parametrize("dtype, batch", [("float32", 8), ("float16", 16)])
def test_backoff_polls_replay_from_graphs_within_tolerance(rng, monkeypatch, dtype, batch):
    config = LSTMConfig(1024, 1024, 1, False, dtype, batch, 23)
    monkeypatch.setattr(persistent, "POLL_BACKOFF_NS", 200)
    assert _tagged_forward(config).tagged
    _assert_graph_replays_match_float64(rng, config, "mma", _tol(dtype))


def test_the_rules_backoff_builds_and_trains_within_tolerance(rng):
    """Unforced: rules.poll_backoff_ns gives fp32 H=1024 B=4's forward (inference and training) 100 ns, built
    without spills; the backward polls at once."""
    config = LSTMConfig(1024, 1024, 1, False, "float32", 4, 24)
    for training in (False, True):
        asked = persistent._built_plans(persistent.run_config(config, training), training, "auto")
        assert persistent._final(asked["forward"]).poll_backoff_ns == 100
        assert persistent.kernel_report(asked["forward"])["local_bytes"] == 0
        assert getattr(asked.get("backward"), "poll_backoff_ns", 0) == 0
    _compare(rng, config, FP32_TOL)
