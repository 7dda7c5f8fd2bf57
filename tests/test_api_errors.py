"""Bad input raises ConfigError naming what was expected and what came; config validation."""
import numpy as np
import pytest

from ecornn import ConfigError, LSTMConfig, NotSupported, init_weights, lstm_backward, lstm_forward
from tests.helpers import random_problem


@pytest.fixture
def problem(rng):
    config = LSTMConfig(4, 3, 2, True, "float32", 2, 5)
    return config, *random_problem(rng, config)


def test_wrong_rank(problem):
    config, w, x, h0, c0 = problem
    with pytest.raises(ConfigError, match=r"x rank: expected 3.*got 2"):
        lstm_forward(x[0], w, bidirectional=True)


def test_wrong_feature_size(problem):
    config, w, x, h0, c0 = problem
    with pytest.raises(ConfigError, match=r"feature size.*expected 4, got 5"):
        lstm_forward(np.zeros((5, 2, 5), np.float32), w, bidirectional=True)


def test_state_shape_mismatch(problem):
    config, w, x, h0, c0 = problem
    with pytest.raises(ConfigError, match=r"h0 shape: expected \(4, 2, 3\), got \(2, 2, 3\)"):
        lstm_forward(x, w, h0[:2], c0, bidirectional=True)
    with pytest.raises(ConfigError, match=r"c0 dtype: expected float32, got float64"):
        lstm_forward(x, w, h0, c0.astype(np.float64), bidirectional=True)


def test_non_float_input(problem):
    config, w, x, h0, c0 = problem
    with pytest.raises(ConfigError, match=r"x dtype: expected a floating type.*got int32"):
        lstm_forward(x.astype(np.int32), w, bidirectional=True)


def test_dtype_mismatch_between_x_and_weights(problem):
    config, w, x, h0, c0 = problem
    with pytest.raises(ConfigError, match=r"x dtype: expected the weights' dtype float32, got float64"):
        lstm_forward(x.astype(np.float64), w, bidirectional=True)


def test_weight_count_and_shape(problem):
    config, w, x, h0, c0 = problem
    with pytest.raises(ConfigError, match=r"number of weight sets.*multiple of 2"):
        lstm_forward(x, w[:3], bidirectional=True)
    bad = list(w)
    bad[2] = bad[2]._replace(w_ih=np.zeros((12, 3), np.float32))
    with pytest.raises(ConfigError, match=r"weights\[2\]\.w_ih.*expected \(12, 6\), got \(12, 3\)"):
        lstm_forward(x, bad, bidirectional=True)


def test_backward_checks_gradient_shapes(problem):
    config, w, x, h0, c0 = problem
    out = lstm_forward(x, w, h0, c0, bidirectional=True, training=True)
    with pytest.raises(ConfigError, match=r"dy shape: expected \(5, 2, 6\)"):
        lstm_backward(out.reserve, np.zeros((5, 2, 3), np.float32))
    with pytest.raises(ConfigError, match=r"reserve: expected the Reserve"):
        lstm_backward(None, out.y)


def test_inference_forward_has_no_reserve(problem):
    config, w, x, h0, c0 = problem
    assert lstm_forward(x, w, bidirectional=True).reserve is None


def test_unknown_strategy_and_unavailable_gpu_strategy(problem):
    config, w, x, h0, c0 = problem
    with pytest.raises(ConfigError, match=r"strategy: expected one of .*got 'magic'"):
        lstm_forward(x, w, bidirectional=True, strategy="magic")
    from ecornn.arrays import gpu_available
    if not gpu_available():
        with pytest.raises(NotSupported, match="fused"):
            lstm_forward(x, w, bidirectional=True, strategy="fused")


@pytest.mark.parametrize("field, value, pattern", [
    ("hidden_size", 0, r"hidden_size: expected a positive int, got 0"),
    ("input_size", -1, r"input_size: expected a positive int, got -1"),
    ("num_layers", 1.5, r"num_layers: expected a positive int, got 1.5"),
    ("dtype", "int8", r"dtype: expected one of .*got 'int8'"),
    ("layout", "CTN", r"layout: expected one of .*got 'CTN'"),
    ("bidirectional", 1, r"bidirectional: expected a bool, got 1"),
])
def test_config_validation(field, value, pattern):
    args = dict(input_size=3, hidden_size=4)
    args[field] = value
    with pytest.raises(ConfigError, match=pattern):
        LSTMConfig(**args)


def test_config_derived_sizes():
    c = LSTMConfig(10, 20, 3, True, "fp16", 4, 7, "NTC")
    assert c.dtype == "float16" and c.num_directions == 2 and c.gate_size == 80
    assert c.layer_input_size(0) == 10 and c.layer_input_size(2) == 40
    assert c.input_shape == (4, 7, 10) and c.output_shape == (4, 7, 40) and c.state_shape == (6, 4, 20)
    assert c.num_parameters() == 2 * (80 * 10 + 80 * 20 + 160) + 2 * 2 * (80 * 40 + 80 * 20 + 160)
    assert c.flops_per_step() == 2 * 2 * 4 * 80 * 30 + 2 * 2 * 2 * 4 * 80 * 60
    assert hash(c.key()) == hash(LSTMConfig(10, 20, 3, True, "float16", 4, 7, "NTC").key())


def test_refresh_weights_checks_what_it_is_given(rng):
    from ecornn import PreparedWeights, prepare_weights, refresh_weights
    config = LSTMConfig(6, 8, 1, False, "float32", 2, 3)
    weights, _, _, _ = random_problem(rng, config)
    prepared = prepare_weights(weights, strategy="reference")
    new, _, _, _ = random_problem(rng, config)
    assert refresh_weights(prepared, new) is prepared and prepared.raw == new
    other, _, _, _ = random_problem(rng, config.replace(hidden_size=9))
    with pytest.raises(ConfigError, match="weights: expected the prepared configuration"):
        refresh_weights(prepared, other)
    with pytest.raises(ConfigError, match="prepared: expected PreparedWeights"):
        refresh_weights(weights, new)
    assert isinstance(prepared, PreparedWeights)


def test_prepared_calls_remember_their_config_and_still_check_every_input(rng):
    """Calls on prepared weights validate x once per (shape, dtype, layout) and reuse that config;
    a different shape gets its own, bad inputs still raise, refresh_weights forgets them."""
    from ecornn import prepare_weights, refresh_weights
    config = LSTMConfig(6, 8, 1, True, "float32", 2, 3)
    weights, x, h0, c0 = random_problem(rng, config)
    prepared = prepare_weights(weights, strategy="reference", bidirectional=True)
    want = lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="reference")
    for _ in range(2):
        got = lstm_forward(x, prepared, h0, c0, bidirectional=True)
        np.testing.assert_array_equal(got.y, want.y)
    assert [call.config for call in prepared.call_configs.values()] == [config]
    longer = np.concatenate([x, x])
    assert lstm_forward(longer, prepared, h0, c0, bidirectional=True).y.shape == (6, 2, 16)
    assert len(prepared.call_configs) == 2
    with pytest.raises(ConfigError, match="x feature size"):
        lstm_forward(x[..., :5], prepared, h0, c0, bidirectional=True)
    with pytest.raises(ConfigError, match="x dtype"):
        lstm_forward(x.astype(np.float64), prepared, h0, c0, bidirectional=True)
    with pytest.raises(ConfigError, match="h0 shape"):
        lstm_forward(x, prepared, h0[:1], c0, bidirectional=True)
    with pytest.raises(ConfigError, match="c0 dtype"):
        lstm_forward(x, prepared, h0, c0.astype(np.float64), bidirectional=True)
    with pytest.raises(ConfigError, match="x: expected a NumPy or CuPy array"):
        lstm_forward([1.0], prepared, h0, c0, bidirectional=True)
    assert len(prepared.call_configs) == 2
    refresh_weights(prepared)
    assert not prepared.call_configs
    zero_state = lstm_forward(x, prepared, bidirectional=True)   # h0, c0 None: zeros made for them
    np.testing.assert_allclose(zero_state.y, lstm_forward(x, weights, bidirectional=True, strategy="reference").y)
