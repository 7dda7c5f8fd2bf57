"""A small fp32 forward + backward with the grid backward in batch groups (v41) for compute-sanitizer runs: 2 layers,
bidirectional, odd H, groups of 4 columns (tagged) and of 8 (grid.sync, late loads); fails unless the grouped
backward ran."""
import numpy as np

from ecornn import LSTMConfig, lstm_backward, lstm_forward
from ecornn.engines import persistent
from ecornn.weights import init_weights

for hidden, batch, groups, tagged in ((40, 16, 4, True), (24, 16, 2, False)):
    persistent.BACKWARD_GROUPS, persistent.TAGGED_EXCHANGE = groups, tagged
    config = LSTMConfig(16, hidden, 2, True, "float32", batch, 5)
    backward = persistent._final(persistent.plans_for(config, True)["backward"])
    assert (backward.kind, backward.batch_groups, backward.tagged) == ("grid", groups, tagged), backward
    rng = np.random.default_rng(batch)
    x = rng.standard_normal(config.input_shape).astype(np.float32)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    out = lstm_forward(x, init_weights(config, seed=1), h0, c0, bidirectional=True, strategy="persistent",
                       training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, np.float32))
    print("backward groups small run ok", groups, backward.describe(), float(np.abs(out.y).sum()),
          float(np.abs(np.asarray(grads.dx)).sum()))
