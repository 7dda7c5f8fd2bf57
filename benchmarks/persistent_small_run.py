"""A small fp32 persistent forward+backward (2 layers, bidirectional) for compute-sanitizer runs:
both exchanges of the grid kernel (v6: tagged and grid.sync, forced; H=397's default is tagged), and an
odd slice size (H=397, B=3, one layer: the word-by-word staging), the v7 backward by gate rows, and
v15's in-kernel input projection (forced) under both exchanges; fails unless the expected kernels ran."""
import numpy as np

from ecornn import LSTMConfig, lstm_backward, lstm_forward
from ecornn.engines import persistent
from ecornn.weights import init_weights

# (hidden, layers, exchange, backward by rows, projection in the kernel): v6's exchanges with the grid
# backward, v7's rows backward, v15's projection.
RUNS = ((40, 2, True, False, False), (40, 2, False, False, False), (397, 1, "auto", False, False),
        (397, 1, False, False, False), (40, 2, "auto", True, False), (397, 1, "auto", True, False),
        (40, 2, True, False, True), (40, 2, False, False, True), (397, 1, "auto", False, True))
for hidden, layers, exchange, by_rows, projection in RUNS:
    persistent.TAGGED_EXCHANGE = exchange
    persistent.BACKWARD_BY_ROWS = by_rows
    persistent.IN_KERNEL_PROJECTION = projection
    bidirectional = layers == 2
    config = LSTMConfig(24, hidden, layers, bidirectional, "float32", 3, 5 if layers == 2 else 3)
    rng = np.random.default_rng(0)
    weights = init_weights(config, seed=1)
    x = rng.standard_normal(config.input_shape).astype(np.float32)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    out = lstm_forward(x, weights, h0, c0, bidirectional=bidirectional, strategy="persistent", training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, np.float32))
    backward = "rows" if by_rows else "grid"
    assert persistent.last_kinds == {"forward": "grid", "backward": backward}, persistent.last_kinds
    built = persistent._final(persistent.plans_for(config, True)["forward"])
    assert built.in_kernel_projection == projection, built.describe()
    print("small run ok", hidden, exchange, backward, projection, float(np.abs(out.y).sum()), float(np.abs(grads.dx).sum()))
persistent.TAGGED_EXCHANGE = "auto"
persistent.BACKWARD_BY_ROWS = "auto"
persistent.IN_KERNEL_PROJECTION = "auto"
