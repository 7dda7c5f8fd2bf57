"""Framework-free functional API on NumPy / CuPy arrays.

``lstm_forward`` validates its inputs, plans a strategy, moves arrays to that strategy's device if
needed (results come back on the caller's array module) and runs it. ``lstm_backward`` takes the
reserve that a training-mode forward returned.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .arrays import cupy_or_none, module_of, to_module
from .config import LSTMConfig, normalize_dtype
from .devices import current_id
from .engines import get_engine
from .errors import ConfigError, expect
from .planner import Plan, plan
from .weights import LayerWeights, config_from_weights, validate_weights


@dataclass
class Reserve:
    """Opaque training state returned by a training-mode forward; pass it to lstm_backward."""

    strategy: str
    config: LSTMConfig
    caller_module: object
    data: object


@dataclass
class PreparedWeights:
    """Weights already converted into one strategy's kernel layout (see ``prepare_weights``).

    Converting once and reusing the result keeps layout transforms out of every call. The caller
    owns freshness: after changing the weights, call ``refresh_weights`` (or prepare again).
    """

    strategy: str
    bidirectional: bool
    raw: list          # framework-layout LayerWeights the data was made from
    data: object       # engine-specific
    call_configs: dict = field(default_factory=dict, repr=False, compare=False)   # (x shape, dtype, layout,
    # training, device) -> the _PreparedCall of a call: inference at small batch is host-bound


@dataclass
class LSTMOutput:
    y: object          # [T, B, D*H] (TNC) or [B, T, D*H] (NTC)
    h: object          # [L*D, B, H]
    c: object          # [L*D, B, H]
    reserve: Reserve | None
    strategy: str
    reason: str


@dataclass
class LSTMGradients:
    dx: object
    dh0: object
    dc0: object
    dweights: list     # LayerWeights per (layer, direction), framework layout


@functools.lru_cache(maxsize=64)
def _dtype_name(dtype) -> str:
    """str(dtype), cached: NumPy builds the name anew on every call (~5 us, twice per state array)."""
    return str(dtype)


def _check_array(name, a, shape, dtype):
    if getattr(a, "shape", None) == shape and hasattr(a, "dtype") and _dtype_name(a.dtype) == dtype:
        return   # the usual case, in a few attribute reads: inference calls are host-bound at small batch
    expect(hasattr(a, "shape") and hasattr(a, "dtype"), name, "a NumPy or CuPy array", type(a).__name__)
    expect(len(a.shape) == len(shape), f"{name} rank", f"{len(shape)} ({shape})", f"{len(a.shape)} {tuple(a.shape)}")
    expect(tuple(a.shape) == tuple(shape), f"{name} shape", tuple(shape), tuple(a.shape))
    expect(_dtype_name(a.dtype) == dtype, f"{name} dtype", dtype, str(a.dtype))


def make_config(x, weights, bidirectional=False, layout="TNC") -> LSTMConfig:
    """Infer the LSTMConfig of a call from its input and weights, validating both."""
    return _call_config(x, weights, bidirectional, layout, weights_validated=False)


def _call_config(x, weights, bidirectional, layout, weights_validated) -> LSTMConfig:
    expect(hasattr(x, "shape") and hasattr(x, "dtype"), "x", "a NumPy or CuPy array", type(x).__name__)
    expect(len(x.shape) == 3, "x rank", f"3 ({layout})", f"{len(x.shape)} {tuple(x.shape)}")
    try:
        normalize_dtype(x.dtype)
    except ConfigError:
        raise ConfigError(f"x dtype: expected a floating type (float16, bfloat16, float32, float64), got {x.dtype}")
    expect(layout in ("TNC", "NTC"), "layout", "'TNC' or 'NTC'", repr(layout))
    steps, batch = (x.shape[0], x.shape[1]) if layout == "TNC" else (x.shape[1], x.shape[0])
    config = config_from_weights(weights, bidirectional, batch=int(batch), seq_len=int(steps), layout=layout)
    expect(x.shape[2] == config.input_size, "x feature size (last axis)", config.input_size, x.shape[2])
    expect(_dtype_name(x.dtype) == config.dtype, "x dtype", f"the weights' dtype {config.dtype}", str(x.dtype))
    if not weights_validated:
        validate_weights(config, weights)
    return config


class _PreparedCall(NamedTuple):
    """What a call on prepared weights validates and plans once per kind of call (``_prepared_call``)."""
    config: LSTMConfig
    chosen: Plan
    engine: object
    state_shape: tuple


def _prepared_call(prepared: PreparedWeights, x, layout, training) -> _PreparedCall:
    """x validated, the plan and its engine of a call on prepared weights, remembered per (x shape, x dtype,
    layout, training, device): the weights' shapes and dtype cannot change (refresh_weights checks them and
    forgets these), and the strategy is the prepared one. v50: the plan and the engine too (5 µs per call)."""
    key = ((tuple(x.shape), x.dtype, layout, training, current_id())
           if hasattr(x, "shape") and hasattr(x, "dtype") else None)
    call = prepared.call_configs.get(key) if key is not None else None
    if call is None:
        config = _call_config(x, prepared.raw, prepared.bidirectional, layout, weights_validated=True)
        chosen = plan(config, prepared.strategy, training)
        call = _PreparedCall(config, chosen, get_engine(chosen.strategy), config.state_shape)
        if key is not None:
            prepared.call_configs[key] = call
    return call


def prepare_weights(weights, *, strategy, bidirectional=False) -> PreparedWeights:
    """Convert framework-layout weights once for ``strategy`` (a GPU engine); pass the result to
    lstm_forward as ``weights`` to skip the per-call conversion."""
    engine = get_engine(strategy)
    config = config_from_weights(weights, bidirectional, batch=1, seq_len=1)
    validate_weights(config, weights)
    xp = np if engine.device == "cpu" else cupy_or_none()
    w_e = [LayerWeights(*(to_module(a, xp) for a in w)) for w in weights]
    data = engine.prepare(config, w_e) if hasattr(engine, "prepare") else None
    return PreparedWeights(strategy, bidirectional, list(weights), data)


def refresh_weights(prepared: PreparedWeights, weights=None) -> PreparedWeights:
    """Bring ``prepared`` up to date with ``weights`` (default: its ``raw`` list, changed in place),
    e.g. after an optimizer step. Engines that can (``persistent``) rewrite their arrays in place, so
    the CUDA graphs captured for these prepared weights stay valid; others prepare again. Call it
    after the backwards of the calls that used the old values. Returns ``prepared``."""
    expect(isinstance(prepared, PreparedWeights), "prepared", "PreparedWeights (from prepare_weights)",
           type(prepared).__name__)
    old = config_from_weights(prepared.raw, prepared.bidirectional, batch=1, seq_len=1)
    if weights is None:        # the arrays prepare_weights validated: their shapes cannot have changed
        weights, config = prepared.raw, old
    else:
        weights = list(weights)
        config = config_from_weights(weights, prepared.bidirectional, batch=1, seq_len=1)
        validate_weights(config, weights)
        expect(config == old, "weights", f"the prepared configuration {old}", config)
    engine = get_engine(prepared.strategy)
    xp = np if engine.device == "cpu" else cupy_or_none()
    w_e = [LayerWeights(*(to_module(a, xp) for a in w)) for w in weights]
    if hasattr(engine, "refresh"):
        engine.refresh(prepared.data, config, w_e)
    elif hasattr(engine, "prepare"):
        prepared.data = engine.prepare(config, w_e)
    prepared.raw = weights
    prepared.call_configs.clear()
    return prepared


def _time_major(a, layout):
    return a if layout == "TNC" else a.swapaxes(0, 1)


def lstm_forward(x, weights, h0=None, c0=None, *, bidirectional=False, layout="TNC",
                 strategy="auto", training=False, dropout=0.0, seed=None) -> LSTMOutput:
    """Run a multi-layer LSTM over ``x``.

    weights: list of LayerWeights(w_ih [4H,K], w_hh [4H,H], b_ih [4H], b_hh [4H]) per
    (layer, direction), layer-major; gates ordered i, f, g, o as in MXNet and PyTorch.
    h0, c0: [L*D, B, H] or None (zeros). dropout applies between layers when training.
    """
    prepared = None
    if isinstance(weights, PreparedWeights):
        prepared, weights = weights, weights.raw
        if prepared.bidirectional != bidirectional:   # (no message formatted per call: host time)
            raise ConfigError(f"bidirectional: expected {prepared.bidirectional} (as the weights were prepared), "
                              f"got {bidirectional}")
        if strategy != "auto" and strategy != prepared.strategy:
            raise ConfigError(f"strategy: expected 'auto' or {prepared.strategy!r} (as the weights were prepared), "
                              f"got {strategy!r}")
        strategy = prepared.strategy
    # prepared weights were validated by prepare_weights / refresh_weights (per call: host time)
    if prepared is not None:
        config, chosen, engine, state_shape = _prepared_call(prepared, x, layout, training)
    else:
        config = _call_config(x, weights, bidirectional, layout, weights_validated=False)
        state_shape = config.state_shape
    x_dtype = x.dtype   # x was validated against the config: a state with its very dtype and the shape passes
    for name, state in (("h0", h0), ("c0", c0)):
        if state is not None and not (getattr(state, "dtype", None) is x_dtype
                                      and getattr(state, "shape", None) == state_shape):
            _check_array(name, state, state_shape, config.dtype)
    expect(0.0 <= dropout < 1.0, "dropout", "a probability in [0, 1)", dropout)
    if prepared is None:
        chosen = plan(config, strategy, training)
        engine = get_engine(chosen.strategy)
    caller = module_of(x)
    xp = np if engine.device == "cpu" else cupy_or_none()
    x_e = to_module(_time_major(x, layout), xp)
    # engines with a prepare step do not read the raw weights when given prepared ones
    w_e = weights if prepared is not None and hasattr(engine, "prepare") else [
        LayerWeights(*(to_module(a, xp) for a in w)) for w in weights]
    zeros = xp.zeros(config.state_shape, dtype=x_e.dtype) if h0 is None or c0 is None else None  # a GPU op
    h0_e = zeros if h0 is None else to_module(h0, xp)
    c0_e = zeros if c0 is None else to_module(c0, xp)
    rng = np.random.default_rng(seed) if training and dropout > 0 else None  # ~20 µs: only if used
    # engines without a prepare step (reference) get the raw weights only
    extra = {"prepared": prepared.data} if prepared is not None and hasattr(engine, "prepare") else {}
    y, h, c, data = engine.forward(config, x_e, w_e, h0_e, c0_e, training=training,
                                   dropout=dropout, rng=rng, **extra)
    y = _time_major(to_module(y, caller), layout)
    reserve = Reserve(chosen.strategy, config, caller, data) if training else None
    dtype = x.dtype
    return LSTMOutput(y.astype(dtype, copy=False), to_module(h, caller).astype(dtype, copy=False),
                      to_module(c, caller).astype(dtype, copy=False), reserve, chosen.strategy, chosen.reason)


def lstm_backward(reserve: Reserve, dy, dh=None, dc=None, *, retain=False) -> LSTMGradients:
    """Gradients of x, h0, c0 and every weight, given dL/dy and optionally dL/dhT, dL/dcT.

    A training forward replayed from a CUDA graph (persistent, prepared weights) leases buffers
    that the next forward may take once this backward has run; a second backward of the same
    reserve after that raises StaleReserve. ``retain=True`` keeps them leased for as long as
    ``reserve`` lives instead (what torch's retain_graph needs)."""
    expect(isinstance(reserve, Reserve), "reserve", "the Reserve of a training-mode lstm_forward",
           type(reserve).__name__)
    config = reserve.config
    _check_array("dy", dy, config.output_shape, config.dtype)
    for name, grad in (("dh", dh), ("dc", dc)):
        if grad is not None:
            _check_array(name, grad, config.state_shape, config.dtype)
    engine = get_engine(reserve.strategy)
    xp = np if engine.device == "cpu" else cupy_or_none()
    dy_e = to_module(_time_major(dy, config.layout), xp)
    zeros = xp.zeros(config.state_shape, dtype=dy_e.dtype) if dh is None or dc is None else None
    dh_e = zeros if dh is None else to_module(dh, xp)
    dc_e = zeros if dc is None else to_module(dc, xp)
    dx, dh0, dc0, dweights = engine.backward(reserve.data, dy_e, dh_e, dc_e, retain=retain)
    back = reserve.caller_module
    cast = lambda a: to_module(a, back).astype(dy.dtype, copy=False)  # noqa: E731
    return LSTMGradients(_time_major(cast(dx), config.layout), cast(dh0), cast(dc0),
                         [LayerWeights(*(cast(a) for a in w)) for w in dweights])
