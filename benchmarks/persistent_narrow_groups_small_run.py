"""A small 16-bit forward + backward in two narrow batch groups (v46: 2-7 columns each, the mma N tile padded) for
compute-sanitizer runs: 2 layers, bidirectional, fp16 B=14 and bf16 B=10 (odd H), fp16 H=256 B=8, bf16 H=256 B=4 (the
backward grouped alone); fails unless the grouped mma kernels ran."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from persistent_groups_small_run import train_once  # noqa: E402

from ecornn import LSTMConfig  # noqa: E402
from ecornn.engines import persistent  # noqa: E402

# (dtype, hidden, batch, forward groups): v46's B = 10-14 groups, and rules.narrow_groups_pay's B=8 and B=4 cells
for dtype, hidden, batch, forward_groups in (("float16", 40, 14, 2), ("bfloat16", 24, 10, 2), ("float16", 256, 8, 2),
                                             ("bfloat16", 256, 4, 1)):
    config = LSTMConfig(16, hidden, 2, True, dtype, batch, 5)
    plans = {k: persistent._final(p) for k, p in persistent.plans_for(config, True).items()}
    assert (plans["forward"].batch_groups, plans["backward"].batch_groups, plans["backward"].batch) == \
        (forward_groups, 2, batch // 2), plans
    train_once(config, "narrow groups small run ok")
