"""v46: 16-bit cells at B = 10-14, now in two batch groups of 5-7 columns (capacity.BATCH_GROUP_MIN 5), against cuDNN
and the fused engine in the same process (bench_groups_v39.run's rows).

    python benchmarks/bench_narrow_groups_v46.py OUT_DIR [--repeats N] [--set 2]
Writes OUT_DIR/bench_narrow_groups_v46.{json,md} (--set 2: the B = 4 and 8 cells, OUT_DIR/bench_narrow_groups_v46_small.*).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_groups_v39 import run  # noqa: E402

CELLS = [("float16", 1024, 12), ("float16", 1024, 10), ("float16", 1024, 14), ("bfloat16", 1024, 12),
         ("float16", 512, 12), ("bfloat16", 256, 10), ("float16", 768, 14)]
SMALL_BATCH_CELLS = [("float16", 256, 8), ("float16", 512, 8), ("bfloat16", 384, 8), ("bfloat16", 256, 4),
                     ("bfloat16", 512, 4)]   # rules.narrow_groups_pay (--set 2)

def main(argv=None):
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--set", type=int, choices=(1, 2), default=1)
    known, rest = parser.parse_known_args(argv)
    small = known.set == 2
    run(SMALL_BATCH_CELLS if small else CELLS, "bench_narrow_groups_v46" + ("_small" if small else ""), rest)


if __name__ == "__main__":
    main()
