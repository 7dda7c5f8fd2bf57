"""A small forward + backward at padded batches (v47: an odd B run as B+1 columns, the added one zero) for
compute-sanitizer runs: 2 layers, bidirectional, fp16 B=13 and bf16 B=9 (two 16-bit groups), fp32 B=7 (the split's
groups of 2 and the grid backward's groups); fails unless the call ran padded and grouped."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from persistent_groups_small_run import train_once  # noqa: E402

from ecornn import LSTMConfig  # noqa: E402
from ecornn.engines import persistent  # noqa: E402

for dtype, hidden, batch in (("float16", 40, 13), ("bfloat16", 24, 9), ("float32", 256, 7)):
    config = LSTMConfig(16, hidden, 2, True, dtype, batch, 5)
    wide = persistent.run_config(config, True)
    plans = {k: persistent._final(p) for k, p in persistent.plans_for(config, True).items()}
    assert wide.batch == batch + 1 and plans["forward"].batch_groups > 1, plans
    train_once(config, "padded small run ok", "mma" if dtype != "float32" else plans["backward"].kind)
