"""fp32 inference where the cluster kernel (v3) holds W_hh: the cluster kernel against the grid
kernel (persistent.CLUSTER_DEFAULT True / False), alternated over rounds after a warm-up round that is
not kept. The whole forward (graph replay, prepared weights), T=256, input = hidden, random non-zero
inputs, CUDA events, medians; the kernel kind that ran is recorded per mode; cuDNN (torch.nn.LSTM,
PyTorch defaults) in the same process for the one-layer rows.

The 2026-11-27 H100 sweep measured the cluster kernel at H=256 B=4 / B=8 (2.25 / 3.85 µs/step) slower
than the grid kernel at H=512 (1.74 / 2.53): this bench says where the cluster kernel still pays.

    python benchmarks/bench_cluster_vs_grid.py OUT_DIR [--rounds N] [--repeats N] [--cells K] [--set rule|boundary]
Writes OUT_DIR/cluster_vs_grid_SET.{json,md} and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
import bench_persistent as bp  # noqa: E402

MODES = {"cluster": {"CLUSTER_DEFAULT": True}, "grid": {"CLUSTER_DEFAULT": False}}
# (dtype, hidden, batch, layers, bidirectional): every H with a cluster plan of <= 8 blocks, the
# batches it takes (plan_cluster on the H100), then layered and bidirectional calls.
CELLS = ([("float32", h, b, 1, False) for h in (64, 128, 256) for b in (1, 2, 4, 8)]
         + [("float32", 128, 16, 1, False), ("float32", 128, 32, 1, False), ("float32", 192, 16, 1, False)]
         + [("float32", 384, b, 1, False) for b in (1, 2, 4)] + [("float32", 448, 1, 1, False)]
         + [("float32", 256, 1, 2, True), ("float32", 256, 4, 2, True), ("float32", 128, 8, 2, True),
            ("float32", 256, 2, 3, False)])
# Near the rule's bound (issue slots 280-936 at B=16/32 and between the first set's cells), "--set boundary".
BOUNDARY = [("float32", h, b, 1, False) for h, b in ((64, 16), (64, 32), (96, 16), (100, 16), (128, 12), (160, 8),
                                                     (200, 4), (320, 1), (320, 2))]


def time_cell(cell, rounds, repeats) -> dict:
    from ecornn.engines import persistent
    problem = ab_modes.cell_problem(cell)

    def measure():
        prepared = persistent.prepare(problem[0], problem[1])
        return {"fwd": ab_modes.whole_forward_us(*problem, prepared, repeats),
                "kind": persistent.last_kinds.get("forward")}
    out = ab_modes.alternate_rounds(MODES, rounds, measure)
    dtype, hidden, batch, layers, bidir = cell
    if layers == 1 and not bidir:
        out["cudnn_us"] = bp.cudnn_times(dtype, hidden, batch, repeats=repeats)[0]
    return out


def table_line(cell, t) -> str:
    med = {m: float(np.median(t[m]["fwd"])) for m in MODES}
    cudnn = f"{t['cudnn_us']:.2f}" if t.get("cudnn_us") else "–"
    return (f"| {' | '.join(map(str, cell[1:]))} | {med['cluster']:.3f} ({t['cluster']['kind'][-1]}) | "
            f"{med['grid']:.3f} ({t['grid']['kind'][-1]}) | {med['cluster'] / med['grid']:.2f} | {cudnn} |")


def _options(parser):
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", type=int, default=None, help="time only the first K cells")
    parser.add_argument("--set", choices=("rule", "boundary"), default="rule", help="the cells measured")


def main(argv=None):
    args, out_dir = bp.bench_args(argv, repeats=10, configure=_options)
    rows, lines = [], ["| H | B | layers | bidir | fwd µs/step cluster (kind) | grid (kind) | cluster/grid | cuDNN |",
                       "|---|---|---|---|---|---|---|---|"]
    for cell in (CELLS if args.set == "rule" else BOUNDARY)[:args.cells]:
        try:
            t = time_cell(cell, args.rounds, args.repeats)
        except Exception as exc:  # noqa: BLE001 - recorded, the other cells still run
            rows.append({"cell": cell, "error": f"{type(exc).__name__}: {str(exc)[:300]}"})
            print(cell, rows[-1]["error"], flush=True)
            continue
        rows.append({"cell": cell, **t})
        lines.append(table_line(cell, t))
        print(lines[-1], flush=True)
        bp.save_rows(out_dir, f"cluster_vs_grid_{args.set}", bp.bench_meta(), rows, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
