"""A small forward + backward whose forward runs in batch groups on thread-block clusters (v44) for compute-sanitizer
runs: the fp32 split in 2 groups of 8 (2 layers, bidirectional) and fp16 in 2 groups of 8 with the input projection in
the kernel; fails unless the grouped clustered forward ran."""
from small_run import train_once

from ecornn import LSTMConfig
from ecornn.engines import persistent

persistent.FP32_TENSOR_CORES, persistent.CLUSTER_K, persistent.CLUSTER_WARPS = True, 2, 8
for dtype, hidden, batch, layers, bidir in (("float32", 128, 16, 2, True), ("float16", 128, 16, 1, False)):
    persistent.BATCH_GROUPS = 2
    config = LSTMConfig(16, hidden, layers, bidir, dtype, batch, 5)
    forward = persistent._final(persistent.plans_for(config, True)["forward"])
    assert (forward.kind, forward.batch_groups, forward.cluster_k) == ("mma", 2, 2), forward
    train_once(config, f"{dtype}: 2 groups on clusters of 2", forward)
