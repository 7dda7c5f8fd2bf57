"""A small forward + backward with the in-kernel projection over part of the inputs and a GEMM over the rest (v51,
INPUT_PART) for compute-sanitizer runs: 2 layers, bidirectional, fp16 B=4 and bf16 B=16 (two batch groups), the
kernel keeping half its input k-tiles (forced: persistent.INPUT_PART_K_TILES); fails unless the plans are partial."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from persistent_groups_small_run import train_once  # noqa: E402

from ecornn import LSTMConfig  # noqa: E402
from ecornn.engines import persistent  # noqa: E402

persistent.IN_KERNEL_PROJECTION = True
persistent.INPUT_PART_K_TILES = "half"
for dtype, batch in (("float16", 4), ("bfloat16", 16)):
    config = LSTMConfig(256, 128, 2, True, dtype, batch, 5)
    forward = persistent._final(persistent.plans_for(config, True)["forward"])
    assert forward.input_part and forward.input_part_from < 256, forward.describe()
    train_once(config, "input part small run ok")
