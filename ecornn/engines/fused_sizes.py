"""Buffer plan of the `fused` strategy: every array it uses, sized up front from the config.

Pure Python (no CuPy): ``workspace_bytes`` / ``reserve_bytes`` answer before any allocation, as
cuDNN's size queries do, and the engine allocates exactly these buffers once per plan.

Layouts (row-major): activations are [T, B, C] like the API's TNC arrays, so h_t is written
straight into the layer output y[t] and read back by the next step's GEMM. Gate rows are
[T, B, 4H] fp32 with the four gates of a unit adjacent (gate-interleaved), which makes the
per-step GEMM a plain "TN" GEMM against row-major [4H, H] weights.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import LSTMConfig

F32 = 4


def storage_bytes(config: LSTMConfig) -> int:
    return 4 if config.dtype == "float32" else 2


@dataclass(frozen=True)
class BufferSpec:
    name: str
    shape: tuple
    kind: str      # "storage" (config dtype) or "f32"
    role: str      # "workspace", "reserve" (kept for backward) or "backward"

    def nbytes(self, config: LSTMConfig) -> int:
        count = 1
        for n in self.shape:
            count *= n
        return count * (F32 if self.kind == "f32" else storage_bytes(config))


def chunk_bounds(steps: int, chunk: int) -> list:
    """[(t0, t1)] time chunks of one input-projection GEMM each."""
    chunk = max(1, min(chunk, steps))
    return [(t0, min(t0 + chunk, steps)) for t0 in range(0, steps, chunk)]


def processing_order(steps: int, reverse: bool) -> list:
    return list(range(steps - 1, -1, -1)) if reverse else list(range(steps))


def cell_slots(position: int, t: int, steps: int, reverse: bool, training: bool) -> tuple:
    """(previous, current) slot of the fp32 cell buffer at processing position ``position``.

    Training keeps every c_t ([T+1] slots, indexed by time so backward finds c_t and c_{t-1}):
    forward direction c_t in slot t+1 and c0 in slot 0; reverse c_t in slot t and c0 in slot T.
    Inference ping-pongs two slots (c0 in slot 0)."""
    if not training:
        return position % 2, (position + 1) % 2
    return (t, t + 1) if not reverse else (t + 1, t)


def initial_cell_slot(steps: int, reverse: bool, training: bool) -> int:
    return steps if (training and reverse) else 0


def forward_buffers(config: LSTMConfig, training: bool, dropout: bool = False,
                    own_weights: bool = True) -> list:
    """Buffers of one forward plan. ``own_weights``: room for a per-call weight conversion when
    the caller did not prepare weights."""
    t, b, h, k = config.seq_len, config.batch, config.hidden_size, config.input_size
    layers, dirs = config.num_layers, config.num_directions
    state = (layers * dirs, b, h)
    kept = "reserve" if training else "workspace"
    specs = [BufferSpec("x", (t, b, k), "storage", "workspace"),
             BufferSpec("h0", state, "storage", kept),
             BufferSpec("c0", state, "storage", kept),
             BufferSpec("hT", state, "storage", "workspace"),
             BufferSpec("cT", state, "storage", "workspace")]
    if training:  # backward reads the layer-0 input; x is overwritten by the next call
        specs[0] = BufferSpec("x", (t, b, k), "storage", "reserve")
    cells = t + 1 if training else 2
    for layer in range(layers):
        specs.append(BufferSpec(f"y{layer}", (t, b, dirs * h), "storage", kept))
        for d in range(dirs):
            specs.append(BufferSpec(f"z{layer}_{d}", (t, b, 4 * h), "f32", kept))
            specs.append(BufferSpec(f"c{layer}_{d}", (cells, b, h), "f32", kept))
        if training and dropout and layer < layers - 1:
            specs.append(BufferSpec(f"mask{layer}", (t, b, dirs * h), "f32", "reserve"))
            specs.append(BufferSpec(f"drop{layer}", (t, b, dirs * h), "storage", "reserve"))
    if own_weights:
        for layer in range(layers):
            kin = config.layer_input_size(layer)
            for d in range(dirs):
                s = f"{layer}_{d}"
                specs += [BufferSpec(f"w_ih{s}", (4 * h, kin), "storage", "workspace"),
                          BufferSpec(f"w_hh{s}", (4 * h, h), "storage", "workspace"),
                          BufferSpec(f"bias{s}", (4 * h,), "f32", "workspace")]
    return specs


def backward_buffers(config: LSTMConfig) -> list:
    """Buffers of one backward pass (allocated on the first backward of a plan)."""
    t, b, h, k = config.seq_len, config.batch, config.hidden_size, config.input_size
    layers, dirs = config.num_layers, config.num_directions
    state = (layers * dirs, b, h)
    widest = max(k, dirs * h)
    specs = [BufferSpec("g_a", (t, b, widest), "f32", "backward"),
             BufferSpec("g_b", (t, b, widest), "f32", "backward"),
             BufferSpec("dh_rec", state, "f32", "backward"),
             BufferSpec("dc", state, "f32", "backward"),
             BufferSpec("dh0", state, "storage", "backward"),
             BufferSpec("dc0", state, "storage", "backward"),
             BufferSpec("dx", (t, b, k), "storage", "backward"),
             BufferSpec("ones", (t * b,), "storage", "backward")]
    for layer in range(layers):
        kin = config.layer_input_size(layer)
        for d in range(dirs):
            s = f"{layer}_{d}"
            specs += [BufferSpec(f"dz{s}", (t, b, 4 * h), "storage", "backward"),
                      BufferSpec(f"dw_ih{s}", (4 * h, kin), "f32", "backward"),
                      BufferSpec(f"dw_hh{s}", (4 * h, h), "f32", "backward"),
                      BufferSpec(f"db{s}", (4 * h,), "f32", "backward")]
    return specs


def reserve_bytes(config: LSTMConfig, dropout: bool = False) -> int:
    """Bytes a training forward keeps for backward (gates, cells, layer outputs, inputs)."""
    specs = forward_buffers(config, training=True, dropout=dropout, own_weights=False)
    return sum(s.nbytes(config) for s in specs if s.role == "reserve")


def workspace_bytes(config: LSTMConfig, training: bool = False, prepared: bool = True) -> int:
    """Scratch bytes beyond the reserve: the forward's (and, when training, the backward's)."""
    specs = forward_buffers(config, training=training, own_weights=not prepared)
    total = sum(s.nbytes(config) for s in specs if s.role == "workspace")
    if training:
        total += sum(s.nbytes(config) for s in backward_buffers(config))
    return total
