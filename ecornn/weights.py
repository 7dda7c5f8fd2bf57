"""Parameters of a multi-layer LSTM in the framework layout (MXNet/PyTorch, gates i, f, g, o).

A model's parameters are a list of ``LayerWeights``, one per (layer, direction), ordered
layer-major: ``[l0, r0, l1, r1, ...]`` (``r`` only when bidirectional). Each matrix is
gate-blocked: rows ``[0:H]`` are the input gate, then forget, cell candidate, output.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np

from .config import LSTMConfig
from .errors import ConfigError, expect

GATES = ("i", "f", "g", "o")


class LayerWeights(NamedTuple):
    w_ih: object  # [4H, K]
    w_hh: object  # [4H, H]
    b_ih: object  # [4H]
    b_hh: object  # [4H]


def slot(layer: int, direction: int, num_directions: int) -> int:
    """Index of (layer, direction) in the layer-major weight list."""
    return layer * num_directions + direction


def mxnet_names(layer: int, direction: int) -> dict:
    """Gluon parameter names (without block prefix) of one layer/direction's LayerWeights fields."""
    p = f"{'lr'[direction]}{layer}"
    return {"w_ih": f"{p}_i2h_weight", "w_hh": f"{p}_h2h_weight",
            "b_ih": f"{p}_i2h_bias", "b_hh": f"{p}_h2h_bias"}


def init_weights(config: LSTMConfig, seed=None, xp=np, scale=None) -> list:
    """Uniform(-1/sqrt(H), 1/sqrt(H)) weights as torch initialises them; float64 on the host
    first so that every dtype and array module sees the same values for one seed."""
    rng = np.random.default_rng(seed)
    bound = scale if scale is not None else 1.0 / np.sqrt(config.hidden_size)
    out = []
    for layer in range(config.num_layers):
        for _ in range(config.num_directions):
            shapes = config.weight_shapes(layer)
            arrays = [rng.uniform(-bound, bound, size=shapes[f]) for f in LayerWeights._fields]
            out.append(LayerWeights(*(to_dtype(a, config.dtype, xp) for a in arrays)))
    return out


def to_dtype(array, dtype: str, xp=np):
    """Convert a host array to ``dtype`` on array module ``xp`` (bfloat16 through ml_dtypes)."""
    host = np.asarray(array)
    if dtype == "bfloat16":
        import ml_dtypes  # only needed for bf16 host arrays
        host = host.astype(np.float32).astype(ml_dtypes.bfloat16)
    else:
        host = host.astype(dtype)
    return host if xp is np else xp.asarray(host)


def validate_weights(config: LSTMConfig, weights: Sequence) -> list:
    """Check count, shapes and dtype of ``weights`` against ``config``; return them as LayerWeights."""
    expected = config.num_layers * config.num_directions
    expect(isinstance(weights, (list, tuple)), "weights", "a list of LayerWeights", type(weights).__name__)
    expect(len(weights) == expected, "number of weight sets (layers x directions)", expected, len(weights))
    out = []
    for index, entry in enumerate(weights):
        entry = LayerWeights(*entry) if not isinstance(entry, LayerWeights) else entry
        layer, direction = divmod(index, config.num_directions)
        for field, shape in config.weight_shapes(layer).items():
            array = getattr(entry, field)
            name = f"weights[{index}].{field} (layer {layer}, direction {direction})"
            expect(tuple(array.shape) == shape, f"{name} shape", shape, tuple(array.shape))
            got = str(array.dtype)
            expect(got == config.dtype, f"{name} dtype", config.dtype, got)
        out.append(entry)
    return out


def config_from_weights(weights: Sequence, bidirectional: bool, **fields) -> LSTMConfig:
    """Infer input/hidden size and layer count from the weight list."""
    if not isinstance(weights, (list, tuple)) or len(weights) == 0:
        raise ConfigError(f"weights: expected a non-empty list of LayerWeights, got {weights!r:.80}")
    directions = 2 if bidirectional else 1
    if len(weights) % directions:
        raise ConfigError(f"number of weight sets: expected a multiple of {directions} "
                          f"(bidirectional={bidirectional}), got {len(weights)}")
    first = LayerWeights(*weights[0])
    if len(first.w_hh.shape) != 2 or len(first.w_ih.shape) != 2:
        raise ConfigError(f"weights[0]: expected 2-D w_ih and w_hh, got shapes "
                          f"{tuple(first.w_ih.shape)} and {tuple(first.w_hh.shape)}")
    return LSTMConfig(input_size=int(first.w_ih.shape[1]), hidden_size=int(first.w_hh.shape[1]),
                      num_layers=len(weights) // directions, bidirectional=bidirectional,
                      dtype=str(first.w_ih.dtype), **fields)
