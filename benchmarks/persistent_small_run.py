"""A small fp32 persistent forward+backward (2 layers, bidirectional) for compute-sanitizer runs:
both exchanges of the grid kernel (v6: tagged, this size's default, and grid.sync forced), and an
odd slice size (H=397, B=3, one layer: the word-by-word staging); fails unless the grid kernel ran."""
import numpy as np

from ecornn import LSTMConfig, lstm_backward, lstm_forward
from ecornn.engines import persistent
from ecornn.weights import init_weights

for hidden, layers, exchange in ((40, 2, "auto"), (40, 2, False), (397, 1, "auto"), (397, 1, False)):
    persistent.TAGGED_EXCHANGE = exchange
    bidirectional = layers == 2
    config = LSTMConfig(24, hidden, layers, bidirectional, "float32", 3, 5 if layers == 2 else 3)
    rng = np.random.default_rng(0)
    weights = init_weights(config, seed=1)
    x = rng.standard_normal(config.input_shape).astype(np.float32)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    out = lstm_forward(x, weights, h0, c0, bidirectional=bidirectional, strategy="persistent", training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, np.float32))
    assert persistent.last_kinds == {"forward": "grid", "backward": "grid"}, persistent.last_kinds
    print("small run ok", hidden, exchange, float(np.abs(out.y).sum()), float(np.abs(grads.dx).sum()))
persistent.TAGGED_EXCHANGE = "auto"
