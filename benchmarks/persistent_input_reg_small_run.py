"""A small forward + backward with W_ih k-tiles of the in-kernel projection in registers (v52, IN_REG_K_TILES) for
compute-sanitizer runs: 2 layers, bidirectional, fp16 B=4 (every W_ih k-tile in registers, with v51's split
projection) and bf16 B=16 in two batch groups (one k-tile); fails unless the built plans hold them."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from persistent_groups_small_run import train_once  # noqa: E402

from ecornn import LSTMConfig  # noqa: E402
from ecornn.engines import persistent  # noqa: E402

persistent.IN_KERNEL_PROJECTION = True
for dtype, batch, k_tiles, part in (("float16", 4, "all", "half"), ("bfloat16", 16, 1, 0)):
    persistent.INPUT_REG_K_TILES, persistent.INPUT_PART_K_TILES = k_tiles, part
    config = LSTMConfig(256, 128, 2, True, dtype, batch, 5)
    forward = persistent._final(persistent.plans_for(config, True)["forward"])
    assert forward.input_reg_k_tiles >= 1 and forward.in_kernel_projection, forward.describe()
    train_once(config, "input register tiles small run ok")
