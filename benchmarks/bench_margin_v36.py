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
import ab_modes  # noqa: E402
from bench_chunked_v36 import errors, forward_call  # noqa: E402
from bench_persistent import STEPS, bench_args, bench_meta, save_rows, training_call  # noqa: E402

TRAIN_CELLS = [(768, 8), (512, 8), (768, 4)]   # (H, B): dX over 4H = 3072 / 2048; dW over T B = 2048 rows at B=8
PROJECTION_CELLS = [(4096, 512, 4), (6144, 512, 4)]   # (inputs, H, B)
MODES = {"2048 / 4096": {"FP32_LONG_REDUCTION_FROM_K": 2048, "FP32_PROJECTION_LONG_FROM_K": 4096},
         "4096 / 8192": {"FP32_LONG_REDUCTION_FROM_K": 4096, "FP32_PROJECTION_LONG_FROM_K": 8192}}


def markdown(rows) -> str:
    return ab_modes.error_time_table(rows, MODES, {"cell": "cell", "what": "what"}, "error", "time", "error", "time")


def main(argv=None):
    args, out = bench_args(argv, repeats=10, configure=lambda p: p.add_argument("--rounds", type=int, default=3))
    rows = []
    for hidden, batch in TRAIN_CELLS:
        rows.append({"cell": f"H={hidden} B={batch}", "what": "fwd+bwd ms; grads",
                     "error": errors(hidden, hidden, batch, True, MODES),
                     "time": ab_modes.alternate_calls(
                         MODES, lambda: training_call("float32", hidden, batch, seed=hidden + batch)[0], args.rounds,
                         args.repeats)})
        save_rows(out, "bench_margin_v36", bench_meta(), rows, markdown(rows))
    for inp, hidden, batch in PROJECTION_CELLS:
        rows.append({"cell": f"in={inp} H={hidden} B={batch}", "what": "forward us/step; y",
                     "error": errors(inp, hidden, batch, False, MODES),
                     "time": ab_modes.alternate_calls(MODES, lambda: forward_call(inp, hidden, batch), args.rounds,
                                                      args.repeats, 1e3 / STEPS)})
        save_rows(out, "bench_margin_v36", bench_meta(), rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
