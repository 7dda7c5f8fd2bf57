"""A small persistent forward+backward (2 layers, bidirectional) for compute-sanitizer runs."""
import numpy as np

from ecornn import LSTMConfig, lstm_backward, lstm_forward
from ecornn.weights import init_weights

config = LSTMConfig(24, 40, 2, True, "float32", 3, 5)
rng = np.random.default_rng(0)
weights = init_weights(config, seed=1)
x = rng.standard_normal(config.input_shape).astype(np.float32)
h0, c0 = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
out = lstm_forward(x, weights, h0, c0, bidirectional=True, strategy="persistent", training=True)
grads = lstm_backward(out.reserve, np.ones(config.output_shape, np.float32))
print("small run ok", float(np.abs(out.y).sum()), float(np.abs(grads.dx).sum()))
