"""A small fp32 forward + backward whose forward runs on thread-block clusters (v42, CLUSTER_K) for compute-sanitizer
runs: 2 layers, bidirectional, clusters of 2 (8 warps, the rule's shape; B=8 and, v43, B=6) and of 4; fails unless the
clustered forward ran."""
from small_run import train_once

from ecornn import LSTMConfig
from ecornn.engines import persistent

persistent.FP32_TENSOR_CORES, persistent.BATCH_GROUPS = True, False
for hidden, batch, cluster in ((128, 8, 2), (128, 6, 2), (40, 4, 4)):   # v43: B=6, the batch padded to N
    persistent.CLUSTER_K, persistent.CLUSTER_WARPS = cluster, 8
    config = LSTMConfig(16, hidden, 2, True, "float32", batch, 5)
    forward = persistent._final(persistent.plans_for(config, True)["forward"])
    assert (forward.kind, forward.cluster_k) == ("mma", cluster), forward
    train_once(config, f"clusters of {cluster}", forward)
