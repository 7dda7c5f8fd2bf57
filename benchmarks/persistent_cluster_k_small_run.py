"""A small fp32 forward + backward whose forward runs on thread-block clusters (v42, CLUSTER_K) for compute-sanitizer
runs: 2 layers, bidirectional, clusters of 2 (8 warps, the rule's shape) and of 4; fails unless the clustered forward
ran."""
import numpy as np

from ecornn import LSTMConfig, lstm_backward, lstm_forward
from ecornn.engines import persistent
from ecornn.weights import init_weights

persistent.FP32_TENSOR_CORES, persistent.BATCH_GROUPS = True, False
for hidden, batch, cluster in ((128, 8, 2), (40, 4, 4)):
    persistent.CLUSTER_K, persistent.CLUSTER_WARPS = cluster, 8
    config = LSTMConfig(16, hidden, 2, True, "float32", batch, 5)
    forward = persistent._final(persistent.plans_for(config, True)["forward"])
    assert (forward.kind, forward.cluster_k) == ("mma", cluster), forward
    rng = np.random.default_rng(batch)
    x = rng.standard_normal(config.input_shape).astype(np.float32)
    h0, c0 = (rng.standard_normal(config.state_shape).astype(np.float32) for _ in range(2))
    out = lstm_forward(x, init_weights(config, seed=1), h0, c0, bidirectional=True, strategy="persistent",
                       training=True)
    grads = lstm_backward(out.reserve, np.ones(config.output_shape, np.float32))
    print("cluster small run ok", cluster, forward.describe(), float(np.abs(out.y).sum()),
          float(np.abs(np.asarray(grads.dx)).sum()))
