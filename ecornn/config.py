"""One object that describes an LSTM problem; kernels, caches and the planner key on it."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .errors import ConfigError, expect

DTYPES = ("float32", "float64", "float16", "bfloat16")
LAYOUTS = ("TNC", "NTC")


def _positive_int(name: str, value) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    expect(ok, name, "a positive int", repr(value))


@dataclass(frozen=True)
class LSTMConfig:
    """Sizes, precision and layout of one (possibly multi-layer, bidirectional) LSTM call.

    ``dtype`` is the storage type of inputs, weights and outputs. Arithmetic accumulates in fp32
    (fp64 for float64) and the cell state is kept in fp32 for the 16-bit types.
    """

    input_size: int
    hidden_size: int
    num_layers: int = 1
    bidirectional: bool = False
    dtype: str = "float32"
    batch: int = 1
    seq_len: int = 1
    layout: str = "TNC"

    def __post_init__(self):
        for name in ("input_size", "hidden_size", "num_layers", "batch", "seq_len"):
            _positive_int(name, getattr(self, name))
        expect(isinstance(self.bidirectional, bool), "bidirectional", "a bool", repr(self.bidirectional))
        dtype = normalize_dtype(self.dtype)
        object.__setattr__(self, "dtype", dtype)
        expect(self.layout in LAYOUTS, "layout", f"one of {LAYOUTS}", repr(self.layout))

    # ---- derived sizes -------------------------------------------------------------------
    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def gate_size(self) -> int:
        return 4 * self.hidden_size

    def layer_input_size(self, layer: int) -> int:
        return self.input_size if layer == 0 else self.num_directions * self.hidden_size

    def weight_shapes(self, layer: int) -> dict:
        """Shapes of one direction's parameters of ``layer`` (framework layout, gate-blocked)."""
        g, k, h = self.gate_size, self.layer_input_size(layer), self.hidden_size
        return {"w_ih": (g, k), "w_hh": (g, h), "b_ih": (g,), "b_hh": (g,)}

    @property
    def input_shape(self) -> tuple:
        t, b = self.seq_len, self.batch
        return (t, b, self.input_size) if self.layout == "TNC" else (b, t, self.input_size)

    @property
    def output_shape(self) -> tuple:
        t, b, c = self.seq_len, self.batch, self.num_directions * self.hidden_size
        return (t, b, c) if self.layout == "TNC" else (b, t, c)

    @property
    def state_shape(self) -> tuple:
        return (self.num_layers * self.num_directions, self.batch, self.hidden_size)

    def num_parameters(self) -> int:
        total = 0
        for layer in range(self.num_layers):
            g, k, h = self.gate_size, self.layer_input_size(layer), self.hidden_size
            total += self.num_directions * (g * k + g * h + 2 * g)
        return total

    def flops_per_step(self) -> float:
        """Forward FLOPs of one timestep over all layers/directions (GEMMs only, 2 per MAC)."""
        total = 0.0
        for layer in range(self.num_layers):
            k = self.layer_input_size(layer) + self.hidden_size
            total += self.num_directions * 2.0 * self.batch * self.gate_size * k
        return total

    def replace(self, **changes) -> "LSTMConfig":
        return dataclasses.replace(self, **changes)

    def key(self) -> tuple:
        """Hashable identity, used by kernel, plan and graph caches (every field is a scalar, so no
        deep copy as dataclasses.astuple makes: graph replays compute it per call)."""
        return (self.input_size, self.hidden_size, self.num_layers, self.bidirectional, self.dtype,
                self.batch, self.seq_len, self.layout)


def normalize_dtype(dtype) -> str:
    """Map numpy/cupy dtypes and strings to one of DTYPES, or raise ConfigError."""
    name = getattr(dtype, "name", None) or str(dtype)
    if name.startswith("<class"):
        name = getattr(dtype, "__name__", name)
    name = {"half": "float16", "float": "float32", "double": "float64", "bf16": "bfloat16",
            "fp16": "float16", "fp32": "float32", "fp64": "float64"}.get(name, name)
    if name not in DTYPES:
        raise ConfigError(f"dtype: expected one of {DTYPES}, got {dtype!r}")
    return name
