"""A small fp32 forward + backward with the grid backward in batch groups (v41) for compute-sanitizer runs: 2 layers,
bidirectional, odd H, groups of 4 columns (tagged) and of 8 (grid.sync, late loads); fails unless the grouped
backward ran."""
from small_run import train_once

from ecornn import LSTMConfig
from ecornn.engines import persistent

for hidden, batch, groups, tagged in ((40, 16, 4, True), (24, 16, 2, False)):
    persistent.BACKWARD_GROUPS, persistent.TAGGED_EXCHANGE = groups, tagged
    config = LSTMConfig(16, hidden, 2, True, "float32", batch, 5)
    backward = persistent._final(persistent.plans_for(config, True)["backward"])
    assert (backward.kind, backward.batch_groups, backward.tagged) == ("grid", groups, tagged), backward
    train_once(config, f"backward groups {groups}", backward)
