"""v48: every GPU kernel and copy of a graph-replayed forward by CUPTI (profile_replay_kernels_v33.profile). Set
"split": the fp32 cells under v48's split of x (one warp per row) and v28's (gpu_blas.SPLIT_BY_WARPS off), and a
padded 16-bit forward (v47) for its copies. Set "padding": padded forwards under v48's copies and v47's.

    python benchmarks/profile_replay_kernels_v48.py OUT_DIR [--repeats N] [--set split|padding]
Writes OUT_DIR/profile_replay_kernels_v48[_padding].{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import bench_args, bench_meta, measure_rows  # noqa: E402
from profile_replay_kernels_v33 import mode_markdown, mode_row  # noqa: E402

MODES = {"v48": {}, "block split": {"SPLIT_BY_WARPS": False},
         "v47 copies": {"PAD_READS_X": False, "PAD_BY_KERNEL": False, "CUT_AT_COPY_OUT": False}}
SETS = {"split": [(mode, "float32", h, b) for h, b in ((1024, 8), (1024, 4), (512, 4)) for mode in ("v48", "block split")]
         + [("v48", "float16", 1024, 13), ("v48", "float16", 1024, 16)],
         "padding": [(mode, dtype, h, b) for dtype, h, b in (("float16", 1024, 13), ("float32", 256, 7))
                     for mode in ("v48", "v47 copies")] + [("v48", "float16", 1024, 14)]}


def main(argv=None):
    args, out = bench_args(argv, repeats=10, configure=lambda p: p.add_argument("--set", default="split",
                                                                               choices=sorted(SETS)))
    name = "profile_replay_kernels_v48" + ("" if args.set == "split" else f"_{args.set}")
    measure_rows(out, name, bench_meta(), SETS[args.set], lambda *spec: mode_row(MODES, *spec, args.repeats), mode_markdown)


if __name__ == "__main__":
    main()
