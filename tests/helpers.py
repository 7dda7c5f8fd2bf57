"""Shared test utilities: relative errors and random LSTM problems."""
import numpy as np

from ecornn import LSTMConfig, init_weights


def rel_err(got, want) -> float:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got)), "non-finite values in result"
    denom = np.linalg.norm(want)
    return float(np.linalg.norm(got - want) / (denom if denom > 0 else 1.0))


def random_problem(rng, config: LSTMConfig, states=True, weight_scale=None):
    """Weights, x, h0, c0 drawn from rng in config.dtype (host arrays)."""
    weights = init_weights(config, seed=int(rng.integers(2**31)), scale=weight_scale)
    x = rng.standard_normal(config.input_shape).astype(config.dtype)
    h0 = rng.standard_normal(config.state_shape).astype(config.dtype) if states else None
    c0 = rng.standard_normal(config.state_shape).astype(config.dtype) if states else None
    return weights, x, h0, c0
