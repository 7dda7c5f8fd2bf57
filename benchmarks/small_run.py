"""The shared part of the compute-sanitizer small runs (persistent_*_small_run.py): one random fp32 problem of
``config`` (seeded by its batch) through the persistent forward and backward, training, bidirectional as configured;
prints the plan and two sums, so a run that did nothing shows."""
import numpy as np

from ecornn import lstm_backward, lstm_forward
from ecornn.weights import init_weights


def train_once(config, label: str, plan) -> None:
    rng = np.random.default_rng(config.batch)
    x = rng.standard_normal(config.input_shape).astype(np.float32)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    out = lstm_forward(x, init_weights(config, seed=1), h0, c0, bidirectional=config.bidirectional,
                       strategy="persistent", training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, np.float32))
    print(f"{label} small run ok", plan.describe(), float(np.abs(out.y).sum()), float(np.abs(np.asarray(grads.dx)).sum()))
