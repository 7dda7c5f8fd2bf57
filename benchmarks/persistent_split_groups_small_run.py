"""A small fp32 forward + backward with the split forward in batch groups (v40) for compute-sanitizer runs: 2 layers,
bidirectional, odd H, groups of 8 columns (tagged) and paired groups of 4; fails unless the grouped split ran."""
from small_run import train_once

from ecornn import LSTMConfig
from ecornn.engines import persistent

for hidden, batch, groups in ((40, 32, 4), (24, 16, 4)):
    persistent.BATCH_GROUPS = groups
    config = LSTMConfig(16, hidden, 2, True, "float32", batch, 5)
    forward = persistent._final(persistent.plans_for(config, True)["forward"])
    assert (forward.kind, forward.parts, forward.batch_groups) == ("mma", 2, groups), forward
    train_once(config, f"split groups {groups}", forward)
    assert persistent.last_kinds["forward"] == "mma", persistent.last_kinds
