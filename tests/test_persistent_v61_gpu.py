"""`persistent` v61 on the GPU: a replay finds its graph by the remembered key (persistent_graph._lookup).

Replays with new inputs every call reuse the key of the call before, match float64 and give the eager path's bits; a
graph-module flag set between calls gets its own graph and, set back, finds the first; the ablation (the key built per
call) gives the same bits."""
import numpy as np
import pytest

from ecornn.engines import persistent_graph
from tests.helpers import random_problem
from tests.test_persistent_v17_gpu import _prepared
from tests.test_persistent_v59_gpu import _call, _eager
from tests.test_persistent_v60_gpu import CASES, _check

pytestmark = pytest.mark.gpu


def _built_keys(monkeypatch) -> list:
    built, real = [], persistent_graph._key
    monkeypatch.setattr(persistent_graph, "_key", lambda *a: built.append(a) or real(*a))
    return built


def _inputs(rng, config):
    import cupy as cp
    _, x, h0, c0 = random_problem(rng, config)
    return (x, h0, c0), tuple(cp.asarray(a) for a in (x, h0, c0))


@pytest.mark.parametrize("name", ["fp32 split on clusters", "fp16 groups (x by reference)",
                                  "bf16 two layers bidirectional", "fp16 padded"])
def test_replays_reuse_the_key_and_match(rng, monkeypatch, name):
    config = CASES[name]
    weights, gpu_weights, prepared = _prepared(rng, config)
    built = _built_keys(monkeypatch)
    for call in range(5):   # eager (and the capture), then replays with new inputs
        host, inputs = _inputs(rng, config)
        if call == 2:
            built.clear()   # from the second replay on, no key is built
        got = _call(config, gpu_weights, prepared, "auto", inputs)
        _check(config, weights, got, *host)
        for g, e in zip(got, _eager(config, gpu_weights, prepared, "auto", inputs)):
            np.testing.assert_array_equal(g, e)
    assert len(prepared.graphs) == 1 and prepared.last_lookup is not None and built == []


def test_a_graph_flag_set_between_calls_gets_its_own_graph_and_set_back_finds_the_first(rng, monkeypatch):
    config = CASES["fp32 paired split"]
    weights, gpu_weights, prepared = _prepared(rng, config)
    front, graphs = persistent_graph.FRONT_BRANCH, []
    for setting in (front, not front, front, not front):
        monkeypatch.setattr(persistent_graph, "FRONT_BRANCH", setting)
        for _ in range(3):
            host, inputs = _inputs(rng, config)
            _check(config, weights, _call(config, gpu_weights, prepared, "auto", inputs), *host)
        graphs.append(len(prepared.graphs))
    assert graphs == [1, 2, 2, 2]


def test_the_key_built_per_call_gives_the_same_bits(rng, monkeypatch):
    config = CASES["fp32 split on clusters"]
    weights, gpu_weights, prepared = _prepared(rng, config)
    runs = []
    host, inputs = _inputs(rng, config)
    for memo in (True, False, True):
        monkeypatch.setattr(persistent_graph, "LOOKUP_MEMO", memo)
        for _ in range(3):
            got = _call(config, gpu_weights, prepared, "auto", inputs)
        runs.append(got)
        _check(config, weights, got, *host)
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(a, b)
    assert len(prepared.graphs) == 1
