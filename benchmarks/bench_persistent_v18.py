"""v18 benchmark: the long first-poll delay (rules.long_poll_delay_pays: tagged tensor-core
forwards at B = 4, H >= 2048) against none (POLL_DELAY=False), with v16's table and measure (whole
forward by graph replay, the kernel alone, fwd+bwd, cuDNN in the same process). The bf16 H=1024 B=4
row is a control the rule leaves out (both modes run without a delay).

    python benchmarks/bench_persistent_v18.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--delay-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v18_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import ab_bench_main  # noqa: E402
from bench_persistent_v16 import markdown, row  # noqa: E402

ROWS = [("bfloat16", 2048, 4), ("float16", 2048, 4), ("bfloat16", 1024, 4)]


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v18_bench", "--delay-first",
                  "time the delay mode first (order bias check)")


if __name__ == "__main__":
    main()
