"""The replay ring only on hosts whose stores reach the GPU in program order (persistent_replay_ring.host_orders_stores,
persistent_graph.use_input_ring): an x86 host takes the ring; an Arm host (Grace), where the slot's tag could become
visible before its addresses, captures its graphs with v17's input copies, and its replays still match the eager path."""
import platform

import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent_graph
from ecornn.engines import persistent_replay_ring as ring_module
from tests.helpers import random_problem
from tests.test_persistent_emulated import cpu_engine  # noqa: F401 - fixture
from tests.test_persistent_graph_cpu import graph_engine  # noqa: F401 - fixture


@pytest.mark.parametrize("machine, ordered", [("x86_64", True), ("AMD64", True), ("i686", True), ("aarch64", False),
                                              ("arm64", False), ("ppc64le", False)])
def test_only_x86_hosts_order_their_stores(machine, ordered):
    assert ring_module.host_orders_stores(machine) is ordered


def test_the_ring_follows_the_host_and_the_flag(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    assert persistent_graph.use_input_ring()
    monkeypatch.setattr(persistent_graph, "INPUTS_BY_REFERENCE", False)
    assert not persistent_graph.use_input_ring()
    monkeypatch.setattr(persistent_graph, "INPUTS_BY_REFERENCE", True)
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    assert not persistent_graph.use_input_ring()


def test_an_arm_host_replays_through_copies_not_a_ring(graph_engine, rng, monkeypatch):  # noqa: F811
    monkeypatch.setattr(persistent_graph, "INPUTS_BY_REFERENCE", True)
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")

    def no_ring(*args, **kwargs):
        raise AssertionError("a replay ring on a host that does not order its stores")
    monkeypatch.setattr(ring_module, "InputRing", no_ring)
    config = LSTMConfig(12, 20, 1, False, "float32", 3, 6)
    weights, _, _, _ = random_problem(rng, config)
    prepared = graph_engine.prepare(config, weights)
    _, x, h0, c0 = random_problem(rng, config)
    eager = graph_engine.forward(config, x, weights, h0, c0, prepared=prepared)[:3]
    assert len(prepared.graphs) == 1 and not persistent_graph.capture_errors
    entry = next(iter(prepared.graphs.values()))
    assert entry.ring is None
    replayed = graph_engine.forward(config, x, weights, h0, c0, prepared=prepared)[:3]
    assert entry.graph.launches == 1
    for a, b in zip(eager, replayed):
        assert np.array_equal(a, b)
