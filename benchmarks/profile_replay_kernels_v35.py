"""v35: every GPU kernel and copy of a graph-replayed fp32 forward by CUPTI (profile_replay_kernels_v33.profile),
under v35's defaults and v34's (UNSCALE_BY_FOURS and SPLIT_READS_X off), so the passes' device time per call
is compared directly (µs per call do not depend on the step's poll timing as the kernel's does).

    python benchmarks/profile_replay_kernels_v35.py OUT_DIR [--repeats N]
Writes OUT_DIR/profile_replay_kernels_v35.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import bench_args, bench_meta, measure_rows  # noqa: E402
from profile_replay_kernels_v33 import mode_markdown, mode_row  # noqa: E402

CELLS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 1536, 4)]
MODES = {"v35": {}, "v34": {"UNSCALE_BY_FOURS": False, "SPLIT_READS_X": False}}
SPECS = [(mode, *cell) for cell in CELLS for mode in MODES]


def main(argv=None):
    args, out = bench_args(argv, repeats=10)
    measure_rows(out, "profile_replay_kernels_v35", bench_meta(), SPECS,
                 lambda *spec: mode_row(MODES, *spec, args.repeats), mode_markdown)


if __name__ == "__main__":
    main()
