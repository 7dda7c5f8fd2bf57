"""v43: fp32 cells at the batches between the measured ones, which now run the split (on clusters of 2 where a block's
units are even), against cuDNN and the fused engine in the same process (bench_groups_v39.run's rows).

    python benchmarks/bench_mid_batches_v43.py OUT_DIR [--repeats N]
Writes OUT_DIR/bench_mid_batches_v43.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_groups_v39 import run  # noqa: E402

CELLS = [("float32", 1024, 6), ("float32", 1024, 5), ("float32", 1024, 7), ("float32", 1024, 12),
         ("float32", 768, 6), ("float32", 1280, 6), ("float32", 896, 6)]

if __name__ == "__main__":
    run(CELLS, "bench_mid_batches_v43")
