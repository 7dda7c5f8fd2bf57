"""A small fp32 forward + backward with the split forward in batch groups (v40) for compute-sanitizer runs: 2 layers,
bidirectional, odd H, groups of 8 columns (tagged) and paired groups of 4; fails unless the grouped split ran."""
import numpy as np

from ecornn import LSTMConfig, lstm_backward, lstm_forward
from ecornn.engines import persistent
from ecornn.weights import init_weights

for hidden, batch, groups in ((40, 32, 4), (24, 16, 4)):
    persistent.BATCH_GROUPS = groups
    config = LSTMConfig(16, hidden, 2, True, "float32", batch, 5)
    forward = persistent._final(persistent.plans_for(config, True)["forward"])
    assert (forward.kind, forward.parts, forward.batch_groups) == ("mma", 2, groups), forward
    rng = np.random.default_rng(batch)
    x = rng.standard_normal(config.input_shape).astype(np.float32)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    out = lstm_forward(x, init_weights(config, seed=1), h0, c0, bidirectional=True, strategy="persistent",
                       training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, np.float32))
    assert persistent.last_kinds["forward"] == "mma", persistent.last_kinds
    print("split groups small run ok", groups, forward.describe(), float(np.abs(out.y).sum()),
          float(np.abs(np.asarray(grads.dx)).sum()))
