"""v47: cells the persistent engine now runs at a padded batch (an odd B as B+1 columns, in more batch groups), against
cuDNN and the fused engine in the same process (bench_groups_v39.run's rows).

    python benchmarks/bench_batch_padding_v47.py OUT_DIR [--repeats N]
Writes OUT_DIR/bench_batch_padding_v47.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_groups_v39 import run  # noqa: E402

CELLS = [("float16", 1024, 15), ("float16", 1024, 13), ("float16", 512, 13), ("bfloat16", 256, 9),
         ("float16", 256, 7), ("float16", 1024, 25), ("float32", 256, 7), ("float32", 512, 11), ("float32", 768, 7)]


if __name__ == "__main__":
    run(CELLS, "bench_batch_padding_v47", sys.argv[1:])
