"""The shared part of the compute-sanitizer small runs (persistent_*_small_run.py): one random problem (fp32, or v44
config.dtype where numpy has it: fp16) of
``config`` (seeded by its batch) through the persistent forward and backward, training, bidirectional as configured;
prints the plan and two sums, so a run that did nothing shows."""
import numpy as np

from ecornn import lstm_backward, lstm_forward
from ecornn.weights import init_weights


def train_once(config, label: str, plan) -> None:
    rng = np.random.default_rng(config.batch)
    dtype = np.float16 if config.dtype == "float16" else np.float32
    x = rng.standard_normal(config.input_shape).astype(dtype)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(dtype) for _ in range(2))
    out = lstm_forward(x, init_weights(config, seed=1), h0, c0, bidirectional=config.bidirectional,
                       strategy="persistent", training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, dtype))
    print(f"{label} small run ok", plan.describe(), float(np.abs(out.y).sum()), float(np.abs(np.asarray(grads.dx)).sum()))
