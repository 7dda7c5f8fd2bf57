"""Strategies: each engine module runs LSTM layers on arrays of one device.

An engine module has ``name``, ``device`` ("cpu" or "gpu"), ``check(config)`` (raises
NotSupported), ``forward(config, x, weights, h0, c0, training=, dropout=, rng=)`` returning
``(y, hT, cT, reserve)`` and ``backward(reserve, dy, dhT, dcT)`` returning
``(dx, dh0, dc0, dweights)``. Arrays are time-major (TNC) in the engine's array module. An engine
with ``prepare(config, weights)`` takes its result as ``forward(..., prepared=)`` and then does not
read ``weights`` (the API passes the caller's raw arrays, unconverted).
"""
from __future__ import annotations

import importlib

from ..errors import ConfigError, NotSupported

STRATEGIES = ("reference", "fused", "persistent")


_LOADED = {}   # strategy -> its engine module, once it imported and its device was found (v50: 2.5 µs per call)


def get_engine(strategy: str):
    """Import and return the engine module for ``strategy`` or raise NotSupported if it cannot run here."""
    module = _LOADED.get(strategy)
    if module is not None:
        return module
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy: expected one of {STRATEGIES + ('auto',)}, got {strategy!r}")
    try:
        module = importlib.import_module(f"{__name__}.{strategy}")
    except ImportError as exc:
        raise NotSupported(strategy, f"engine not available on this machine ({exc})") from exc
    if getattr(module, "device", "cpu") == "gpu":
        from ..arrays import gpu_available
        if not gpu_available():
            raise NotSupported(strategy, "needs CuPy and a CUDA GPU; none found")
    _LOADED[strategy] = module
    return module
