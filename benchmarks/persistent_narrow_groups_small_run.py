"""A small 16-bit forward + backward in two narrow batch groups (v46: 5-7 columns each, the mma N tile padded) for
compute-sanitizer runs: 2 layers, bidirectional, odd H, fp16 B=14 and bf16 B=10; fails unless the grouped mma kernels
ran."""
import numpy as np

from ecornn import LSTMConfig, lstm_backward, lstm_forward
from ecornn.engines import persistent
from ecornn.weights import init_weights

for dtype, hidden, batch in (("float16", 40, 14), ("bfloat16", 24, 10)):
    config = LSTMConfig(16, hidden, 2, True, dtype, batch, 5)
    plans = {k: persistent._final(p) for k, p in persistent.plans_for(config, True).items()}
    assert {(p.batch_groups, p.batch) for p in plans.values()} == {(2, batch // 2)}, plans
    rng = np.random.default_rng(batch)
    x = rng.standard_normal(config.input_shape).astype(dtype)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(dtype) for _ in range(2))
    out = lstm_forward(x, init_weights(config, seed=1), h0, c0, bidirectional=True, strategy="persistent",
                       training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, dtype))
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}, persistent.last_kinds
    print("narrow groups small run ok", dtype, batch, float(np.abs(np.asarray(out.y, np.float32)).sum()),
          float(np.abs(np.asarray(grads.dx, np.float32)).sum()))
