"""v46: 16-bit cells at B = 10-14, now in two batch groups of 5-7 columns (capacity.BATCH_GROUP_MIN 5), against cuDNN
and the fused engine in the same process (bench_groups_v39.run's rows).

    python benchmarks/bench_narrow_groups_v46.py OUT_DIR [--repeats N]
Writes OUT_DIR/bench_narrow_groups_v46.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_groups_v39 import run  # noqa: E402

CELLS = [("float16", 1024, 12), ("float16", 1024, 10), ("float16", 1024, 14), ("bfloat16", 1024, 12),
         ("float16", 512, 12), ("bfloat16", 256, 10), ("float16", 768, 14)]

if __name__ == "__main__":
    run(CELLS, "bench_narrow_groups_v46")
