"""A small forward + backward whose fp32 backward runs by gate rows with the batch stride padded to 4 (v45: B=7, two
layers bidirectional; B=10) for compute-sanitizer runs; fails unless the rows backward ran."""
from small_run import train_once

from ecornn import LSTMConfig
from ecornn.engines import persistent

persistent.BACKWARD_BY_ROWS = True
for hidden, batch, layers, bidir in ((128, 7, 2, True), (96, 10, 1, False)):
    config = LSTMConfig(16, hidden, layers, bidir, "float32", batch, 5)
    backward = persistent.plans_for(config, True)["backward"]
    assert backward.kind == "rows", backward
    train_once(config, f"rows backward B={batch}", backward)
    assert persistent.last_kinds["backward"] == "rows", persistent.last_kinds
