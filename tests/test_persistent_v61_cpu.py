"""`persistent` v61 on the CPU: a replay finds its graph without building its key.

persistent_graph._lookup reuses the key of the prepared weights' last replay while the call's stamp (configuration,
mode, dtypes, device, the count of flag assignments) equals that call's; persistent_graph's own flags, which the key
holds, are counted too. Whatever the sequence of calls, the key found must be the key built now.
"""
import random
from types import SimpleNamespace

import numpy as np
import pytest

from ecornn import flag_changes
from ecornn.config import LSTMConfig
from ecornn.engines import persistent, persistent_graph


@pytest.fixture
def built(monkeypatch):
    """_key counted; the device a settable stand-in (no CuPy device here)."""
    calls, device = [], SimpleNamespace(id=0)
    real = persistent_graph._key
    monkeypatch.setattr(persistent_graph, "_key", lambda *a: calls.append(a) or real(*a))
    monkeypatch.setattr(persistent_graph, "_cp", lambda: SimpleNamespace(
        cuda=SimpleNamespace(runtime=SimpleNamespace(getDevice=lambda: device.id))))
    return SimpleNamespace(calls=calls, device=device)


def _config(batch=4, dtype="float32"):
    return LSTMConfig(input_size=8, hidden_size=8, num_layers=1, bidirectional=False, dtype=dtype, batch=batch,
                      seq_len=3)


def _arrays(dtype=np.float32):
    return tuple(np.zeros(2, dtype) for _ in range(3))


def _prepared_with_graph_of(config, mode, arrays, device=0):
    prepared = persistent.PersistentWeights(8, [])
    prepared.graphs[persistent_graph._key(config, mode, *arrays, device)] = "graph"
    return prepared


def test_the_second_lookup_reuses_the_key_and_finds_the_graph(built):
    config, mode, arrays = _config(), persistent._graph_mode("auto"), _arrays()
    prepared = _prepared_with_graph_of(config, mode, arrays)
    built.calls.clear()
    first = persistent_graph._lookup(prepared, config, mode, *arrays, 0)
    second = persistent_graph._lookup(prepared, config, mode, *arrays, 0)
    assert first[1] == second[1] == "graph" and second[0] is first[0] and len(built.calls) == 1
    assert first[0] == persistent_graph._key(config, mode, *arrays, 0)


def test_a_miss_is_not_remembered(built):
    config, mode, arrays = _config(), persistent._graph_mode("auto"), _arrays()
    prepared = persistent.PersistentWeights(8, [])
    assert persistent_graph._lookup(prepared, config, mode, *arrays, 0)[1] is None
    assert prepared.last_lookup is None


def test_an_equal_new_configuration_finds_the_same_graph_without_a_new_key(built):
    mode, arrays = persistent._graph_mode("auto"), _arrays()
    prepared = _prepared_with_graph_of(_config(), mode, arrays)
    persistent_graph._lookup(prepared, _config(), mode, *arrays, 0)
    built.calls.clear()
    assert persistent_graph._lookup(prepared, _config(), mode, *arrays, 0)[1] == "graph" and not built.calls


@pytest.mark.parametrize("change", ["batch", "dtype", "device", "mode"])
def test_a_changed_call_builds_its_own_key(built, change):
    config, mode, arrays = _config(), persistent._graph_mode("auto"), _arrays()
    prepared = _prepared_with_graph_of(config, mode, arrays)
    persistent_graph._lookup(prepared, config, mode, *arrays, 0)
    built.calls.clear()
    call = {"batch": (_config(batch=5), mode, *arrays, 0), "dtype": (config, mode, *_arrays(np.float16), 0),
            "device": (config, mode, *arrays, 1), "mode": (config, persistent._graph_mode("rows"), *arrays, 0)}
    key, entry = persistent_graph._lookup(prepared, *call[change])
    assert entry is None and len(built.calls) == 1 and key == persistent_graph._key(*call[change])


@pytest.mark.parametrize("flag", ["CAPTURE_OUTPUT_CASTS", "FRONT_BRANCH", "OUTPUTS_IN_PLACE", "KERNEL_READS_X"])
def test_a_graph_module_flag_set_between_calls_builds_a_new_key_and_set_back_finds_the_graph(
        built, monkeypatch, flag):
    config, mode, arrays = _config(), persistent._graph_mode("auto"), _arrays()
    prepared = _prepared_with_graph_of(config, mode, arrays)
    persistent_graph._lookup(prepared, config, mode, *arrays, 0)
    value = getattr(persistent_graph, flag)
    monkeypatch.setattr(persistent_graph, flag, not value)
    assert persistent_graph._lookup(prepared, config, mode, *arrays, 0)[1] is None
    monkeypatch.setattr(persistent_graph, flag, value)
    assert persistent_graph._lookup(prepared, config, mode, *arrays, 0)[1] == "graph"


def test_the_graph_module_is_counted():
    assert type(persistent_graph) is flag_changes._CountedModule


def test_without_the_memo_every_lookup_builds_its_key(built, monkeypatch):
    monkeypatch.setattr(persistent_graph, "LOOKUP_MEMO", False)
    config, mode, arrays = _config(), persistent._graph_mode("auto"), _arrays()
    prepared = _prepared_with_graph_of(config, mode, arrays)
    built.calls.clear()
    for _ in range(3):
        assert persistent_graph._lookup(prepared, config, mode, *arrays, 0)[1] == "graph"
    assert len(built.calls) == 3 and prepared.last_lookup is None


def test_any_sequence_of_calls_finds_the_key_built_now(built, monkeypatch):
    """Random calls (configurations new or reused, dtypes, devices, modes, flags toggled and restored, graphs
    evicted): the key _lookup uses is always the key _key builds for that call, and a graph is found exactly when
    one was captured under that key."""
    rng = random.Random()
    configs = [_config(), _config(batch=2), _config(dtype="float16")]
    prepared = persistent.PersistentWeights(8, [])
    flags = ("CAPTURE_INPUT_CASTS", "FRONT_BRANCH", "INPUTS_BY_REFERENCE")
    for step in range(400):
        what = rng.random()
        if what < 0.1:
            flag = rng.choice(flags)
            monkeypatch.setattr(persistent_graph, flag, not getattr(persistent_graph, flag))
        elif what < 0.15:
            prepared.graphs.clear()
        config = rng.choice(configs) if rng.random() < 0.8 else _config(batch=rng.choice((2, 4)))
        mode = persistent._graph_mode(rng.choice(("auto", "auto", "rows")))
        arrays = _arrays(rng.choice((np.float32, np.float32, np.float16)))
        device = rng.choice((0, 0, 0, 1))
        want = persistent_graph._key(config, mode, *arrays, device)
        if rng.random() < 0.3:
            prepared.graphs[want] = ("graph", step)
        key, entry = persistent_graph._lookup(prepared, config, mode, *arrays, device)
        assert key == want and entry == prepared.graphs.get(want)


def _grouped_b16(monkeypatch, reg_tiles):
    from ecornn.devices import KNOWN
    monkeypatch.setattr(persistent, "_props", lambda: dict(KNOWN["h200"].as_dict()))
    monkeypatch.setattr(persistent, "INPUT_REG_K_TILES", reg_tiles)
    return persistent.plans_for(LSTMConfig(1024, 1024, 1, False, "float16", 16, 256), False)["forward"]


@pytest.mark.parametrize("accepted, want", [(0, [3, 1]), (16, [3]), (15, [3, 1])])
def test_the_spill_diagnostic_keeps_a_build_within_its_bytes(monkeypatch, accepted, want):
    """v61d: DIAG_SPILL_BYTES_ACCEPTED keeps a build with at most that much local memory as built (timing only); 0,
    the default, backs off as before (3 W_ih register k-tiles halve to 1). Stand-in compiler: 16 bytes at 3."""
    plan = _grouped_b16(monkeypatch, 3)
    monkeypatch.setattr(persistent, "DIAG_SPILL_BYTES_ACCEPTED", accepted)
    built = []

    def module(p, cooperative=True):
        built.append(p.input_reg_k_tiles)
        return SimpleNamespace(get_function=lambda name: SimpleNamespace(
            local_size_bytes=16 if p.input_reg_k_tiles > 2 else 0))
    monkeypatch.setattr(persistent, "_module", module)
    final, _ = persistent._compile_without_spills(plan, "persistent_lstm_fwd", True)
    assert built == want and final.input_reg_k_tiles == want[-1]


def test_the_spill_diagnostic_is_in_the_graph_mode_and_the_build_cache(monkeypatch):
    import inspect
    first = persistent._graph_mode("auto")
    monkeypatch.setattr(persistent, "DIAG_SPILL_BYTES_ACCEPTED", 64)
    assert persistent._graph_mode("auto") != first
    assert "DIAG_SPILL_BYTES_ACCEPTED" in inspect.getsource(persistent._remembered)
