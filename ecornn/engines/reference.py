"""NumPy reference engine: defines the numerics every other strategy is checked against.

Arrays are time-major (TNC). Arithmetic runs in float64 for float64 inputs and float32 otherwise
(16-bit inputs are upcast; outputs are cast back to the input dtype).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..config import LSTMConfig
from ..weights import LayerWeights, slot

name = "reference"
device = "cpu"


def compute_dtype(config: LSTMConfig):
    return np.float64 if config.dtype == "float64" else np.float32


def sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # no overflow for large |z|


@dataclass
class ReferenceReserve:
    """What the forward pass saves for backward (as cuDNN's reserve space does)."""

    config: LSTMConfig
    weights: list                      # LayerWeights in the compute dtype
    h0: np.ndarray
    c0: np.ndarray
    layer_inputs: list = field(default_factory=list)   # [layer] -> [T, B, K]
    gates: dict = field(default_factory=dict)          # slot -> activated gates [T, B, 4H]
    cells: dict = field(default_factory=dict)          # slot -> c_t [T, B, H]
    hiddens: dict = field(default_factory=dict)        # slot -> h_t [T, B, H]
    dropout_masks: dict = field(default_factory=dict)  # layer -> scaled keep mask [T, B, D*H]


def check(config: LSTMConfig) -> None:
    """The reference runs every valid configuration."""


def forward(config, x, weights, h0, c0, *, training=False, dropout=0.0, rng=None):
    """Run all layers; returns (y, hT, cT, reserve or None)."""
    ct = compute_dtype(config)
    weights = [LayerWeights(*(np.asarray(a, dtype=ct) for a in w)) for w in weights]
    reserve = ReferenceReserve(config, weights, np.asarray(h0, ct), np.asarray(c0, ct))
    h_final = np.empty(config.state_shape, ct)
    c_final = np.empty(config.state_shape, ct)
    layer_in = np.asarray(x, dtype=ct)
    for layer in range(config.num_layers):
        reserve.layer_inputs.append(layer_in)
        outs = []
        for direction in range(config.num_directions):
            s = slot(layer, direction, config.num_directions)
            gates, cells, hiddens = _run_direction(layer_in, weights[s], reserve.h0[s],
                                                   reserve.c0[s], reverse=direction == 1)
            reserve.gates[s], reserve.cells[s], reserve.hiddens[s] = gates, cells, hiddens
            last = 0 if direction == 1 else -1
            h_final[s], c_final[s] = hiddens[last], cells[last]
            outs.append(hiddens)
        layer_in = np.concatenate(outs, axis=-1)
        if training and dropout > 0 and layer < config.num_layers - 1:
            mask = (rng.random(layer_in.shape) >= dropout).astype(ct) / ct(1.0 - dropout)
            reserve.dropout_masks[layer] = mask
            layer_in = layer_in * mask
    return layer_in, h_final, c_final, (reserve if training else None)


def _run_direction(x, w: LayerWeights, h, c, reverse: bool):
    steps, hidden = x.shape[0], w.w_hh.shape[1]
    xw = x @ w.w_ih.T + (w.b_ih + w.b_hh)  # input projection of all steps: one GEMM
    gates = np.empty(xw.shape, xw.dtype)
    cells = np.empty(xw.shape[:2] + (hidden,), xw.dtype)
    hiddens = np.empty_like(cells)
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        z = xw[t] + h @ w.w_hh.T
        i, f = sigmoid(z[:, :hidden]), sigmoid(z[:, hidden:2 * hidden])
        g, o = np.tanh(z[:, 2 * hidden:3 * hidden]), sigmoid(z[:, 3 * hidden:])
        c = f * c + i * g
        h = o * np.tanh(c)
        gates[t] = np.concatenate([i, f, g, o], axis=-1)
        cells[t], hiddens[t] = c, h
    return gates, cells, hiddens


def backward(reserve: ReferenceReserve, dy, dhT, dcT, retain=False):   # retain: the reserve always lives on
    """BPTT: returns (dx, dh0, dc0, [LayerWeights of gradients])."""
    config = reserve.config
    ct = compute_dtype(config)
    hidden, dirs = config.hidden_size, config.num_directions
    d_out = np.asarray(dy, ct)
    dhT, dcT = np.asarray(dhT, ct), np.asarray(dcT, ct)
    dh0 = np.empty(config.state_shape, ct)
    dc0 = np.empty(config.state_shape, ct)
    grads = [None] * (config.num_layers * dirs)
    for layer in reversed(range(config.num_layers)):
        if layer in reserve.dropout_masks:
            d_out = d_out * reserve.dropout_masks[layer]
        x = reserve.layer_inputs[layer]
        d_in = np.zeros(x.shape, ct)
        for direction in range(dirs):
            s = slot(layer, direction, dirs)
            w = reserve.weights[s]
            d_h = d_out[..., direction * hidden:(direction + 1) * hidden]
            dz, dh0[s], dc0[s] = _bptt_direction(reserve, s, d_h, dhT[s], dcT[s], direction == 1)
            h_prev = _previous_hidden(reserve.hiddens[s], reserve.h0[s], direction == 1)
            flat_dz = dz.reshape(-1, dz.shape[-1])
            db = flat_dz.sum(axis=0)
            grads[s] = LayerWeights(flat_dz.T @ x.reshape(-1, x.shape[-1]),
                                    flat_dz.T @ h_prev.reshape(-1, hidden), db, db.copy())
            d_in += dz @ w.w_ih
        d_out = d_in
    return d_out, dh0, dc0, grads


def _previous_hidden(hiddens, h0, reverse: bool):
    """h_{t-1} in processing order for every t."""
    if reverse:
        return np.concatenate([hiddens[1:], h0[None]], axis=0)
    return np.concatenate([h0[None], hiddens[:-1]], axis=0)


def _bptt_direction(reserve, s, d_h, dh_next, dc_next, reverse: bool):
    w = reserve.weights[s]
    gates, cells = reserve.gates[s], reserve.cells[s]
    hidden, steps = w.w_hh.shape[1], gates.shape[0]
    dz = np.empty(gates.shape, gates.dtype)
    order = range(steps) if reverse else range(steps - 1, -1, -1)  # reverse of processing order
    for t in order:
        prev = t + 1 if reverse else t - 1
        c_prev = reserve.c0[s] if prev in (-1, steps) else cells[prev]
        i, f = gates[t, :, :hidden], gates[t, :, hidden:2 * hidden]
        g, o = gates[t, :, 2 * hidden:3 * hidden], gates[t, :, 3 * hidden:]
        tanh_c = np.tanh(cells[t])
        dh = d_h[t] + dh_next
        dc = dh * o * (1.0 - tanh_c * tanh_c) + dc_next
        dz[t] = np.concatenate([dc * g * i * (1.0 - i), dc * c_prev * f * (1.0 - f),
                                dc * i * (1.0 - g * g), dh * tanh_c * o * (1.0 - o)], axis=-1)
        dc_next = dc * f
        dh_next = dz[t] @ w.w_hh
    return dz, dh_next, dc_next
