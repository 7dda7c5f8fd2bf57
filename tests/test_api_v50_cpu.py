"""v50: a call on prepared weights validates x, plans and finds its engine once per kind of call (x shape, dtype,
layout, training, device); the engines are imported once. What every call still checks still raises."""
import numpy as np
import pytest

from ecornn import ConfigError, LSTMConfig, lstm_forward, prepare_weights, refresh_weights
from ecornn import api, engines
from tests.helpers import random_problem


def _counting(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(a) or real(*a, **k))
    return calls


def test_prepared_calls_plan_once_per_kind_of_call(rng, monkeypatch):
    config = LSTMConfig(5, 6, 2, False, "float32", 3, 4)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = prepare_weights(weights, strategy="reference")
    plans = _counting(monkeypatch, api, "plan")
    want = lstm_forward(x, weights, h0, c0, strategy="reference").y
    for _ in range(3):
        np.testing.assert_array_equal(lstm_forward(x, prepared, h0, c0).y, want)
    lstm_forward(x, prepared, h0, c0, training=True)   # training is a kind of its own
    lstm_forward(x, prepared, h0, c0, training=True)
    assert [a[2] for a in plans[1:]] == [False, True]   # the raw-weights call plans too (the first)
    (call_false, call_true) = prepared.call_configs.values()
    assert call_false.config == config and call_false.chosen.strategy == "reference"
    assert call_false.engine is engines.get_engine("reference") and call_false.state_shape == config.state_shape
    refresh_weights(prepared)
    lstm_forward(x, prepared, h0, c0)
    assert len(plans) == 4   # forgotten by refresh_weights, planned again


def test_what_a_remembered_call_still_checks(rng):
    config = LSTMConfig(5, 6, 1, True, "float32", 2, 3)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = prepare_weights(weights, strategy="reference", bidirectional=True)
    lstm_forward(x, prepared, h0, c0, bidirectional=True)
    with pytest.raises(ConfigError, match=r"bidirectional: expected True \(as the weights were prepared\), got False"):
        lstm_forward(x, prepared, h0, c0)
    with pytest.raises(ConfigError, match="strategy: expected 'auto' or 'reference' .*, got 'fused'"):
        lstm_forward(x, prepared, h0, c0, bidirectional=True, strategy="fused")
    with pytest.raises(ConfigError, match="h0 shape"):
        lstm_forward(x, prepared, h0[:, :1], c0, bidirectional=True)
    with pytest.raises(ConfigError, match="c0 dtype"):
        lstm_forward(x, prepared, h0, c0.astype(np.float64), bidirectional=True)
    with pytest.raises(ConfigError, match="dropout"):
        lstm_forward(x, prepared, h0, c0, bidirectional=True, dropout=1.5)
    assert len(prepared.call_configs) == 1


def test_engines_are_imported_once_and_failures_are_not_remembered(monkeypatch):
    imports = _counting(monkeypatch, engines.importlib, "import_module")
    engines._LOADED.pop("reference", None)
    first = engines.get_engine("reference")
    assert engines.get_engine("reference") is first and len(imports) == 1
    with pytest.raises(ConfigError, match="strategy: expected one of"):
        engines.get_engine("nonesuch")
    assert "nonesuch" not in engines._LOADED
