"""v36: where a fp32 reduction counts as long. v35's thresholds (backward K = 4096, projection 8192 inputs) leave
one-pass GEMMs just below them at ~9.5e-6 of float64 (K = 4095) and fp16-split projections at ~9.4e-6 (8191 inputs):
inside fp32's 1e-5, without margin. Halved thresholds (2048 / 4096) chunk those too. Cells between the two: errors
against float64 and times, the two settings alternated in one process (bench_chunked_v36's measures).

    python benchmarks/bench_margin_v36.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/bench_margin_v36.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_chunked_v36 import measure_cells  # noqa: E402

TRAIN_CELLS = [(768, 8), (512, 8), (768, 4)]   # (H, B): dX over 4H = 3072 / 2048; dW over T B = 2048 rows at B=8
PROJECTION_CELLS = [(4096, 512, 4), (6144, 512, 4)]   # (inputs, H, B)
MODES = {"2048 / 4096": {"FP32_LONG_REDUCTION_FROM_K": 2048, "FP32_PROJECTION_LONG_FROM_K": 4096},
         "4096 / 8192": {"FP32_LONG_REDUCTION_FROM_K": 4096, "FP32_PROJECTION_LONG_FROM_K": 8192}}


def main(argv=None):
    measure_cells(argv, "bench_margin_v36", MODES, TRAIN_CELLS, PROJECTION_CELLS, rounds=3)


if __name__ == "__main__":
    main()
