"""`persistent` v43 on the CPU: the engine flag CLUSTER_ASYNC (the clustered forward's partials by st.async onto the
owner's mbarrier) reaches the builds of clustered plans only, and the graph mode."""
import pytest

from ecornn import LSTMConfig, gpu
from ecornn.engines import persistent
from ecornn.engines import persistent_capacity as cap


@pytest.fixture
def on_h100(monkeypatch):
    monkeypatch.setattr(persistent, "_props", cap.h100_properties)


def _forward(hidden, batch):
    return persistent.plans_for(LSTMConfig(hidden, hidden, 1, False, "float32", batch, 16))["forward"]


def _build_defines(monkeypatch, plan) -> dict:
    seen = []
    monkeypatch.setattr(gpu, "compile_module", lambda file, defines, cooperative=True: seen.append(defines))
    persistent._module(plan)
    return seen[0]


def test_the_flag_reaches_clustered_builds_only(on_h100, monkeypatch):
    clustered, plain = _forward(1024, 8), _forward(1024, 4)
    assert (clustered.cluster_k, plain.cluster_k) == (2, 1)
    assert "CLUSTER_ASYNC" not in _build_defines(monkeypatch, clustered)
    mode = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "CLUSTER_ASYNC", True)
    assert _build_defines(monkeypatch, clustered)["CLUSTER_ASYNC"] == 1
    assert "CLUSTER_ASYNC" not in _build_defines(monkeypatch, plain)
    assert persistent._graph_mode("auto") != mode
