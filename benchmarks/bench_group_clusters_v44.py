"""v44: fp32 cells whose split runs in batch groups of 8 columns on clusters of 2 (rules.cluster_split_pays), against
cuDNN and the fused engine in the same process (bench_groups_v39.run's rows).

    python benchmarks/bench_group_clusters_v44.py OUT_DIR [--repeats N]
Writes OUT_DIR/bench_group_clusters_v44.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_groups_v39 import run  # noqa: E402

CELLS = [("float32", 1024, 16), ("float32", 896, 16), ("float32", 768, 16), ("float32", 512, 32)]

if __name__ == "__main__":
    run(CELLS, "bench_group_clusters_v44")
