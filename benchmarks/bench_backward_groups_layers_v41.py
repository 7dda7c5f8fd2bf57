"""v41: fp32 training of stacked and bidirectional layers with the grid backward in batch groups ("auto") against no
groups (BACKWARD_GROUPS=False), alternated rounds (the first dropped), and cuDNN (torch.nn.LSTM with the same layers
and directions, PyTorch defaults) in the same process: fwd+bwd ms, T=256, input = hidden.

    python benchmarks/bench_backward_groups_layers_v41.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/bench_backward_groups_layers_v41.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import STEPS, _median_ms, _problem, bench_args, bench_meta, measure_rows  # noqa: E402
from bench_persistent_v5 import _train_ms  # noqa: E402

CELLS = [(256, 32, 2, True), (512, 16, 2, False), (512, 16, 1, True), (384, 32, 3, False), (256, 16, 2, True)]
MODES = {"none": {"BACKWARD_GROUPS": False}, "auto": {}}


def cudnn_train_ms(hidden, batch, layers, bidir, repeats) -> float:
    """torch.nn.LSTM fwd+bwd ms (fp32, cuDNN's defaults: TF32 allowed), input = hidden."""
    import torch
    lstm = torch.nn.LSTM(hidden, hidden, layers, bidirectional=bidir).cuda()
    x = torch.randn(STEPS, batch, hidden, device="cuda", requires_grad=True)
    state = torch.randn(layers * (2 if bidir else 1), batch, hidden, device="cuda") * 0.5

    def train():
        y, _ = lstm(x, (state, state))
        y.backward(torch.ones_like(y))
    return _median_ms(train, max(5, repeats // 2))


def measure(hidden, batch, layers, bidir, rounds, repeats) -> dict:
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem("float32", hidden, batch, seed=hidden + batch, layers=layers,
                                          bidirectional=bidir)
    plans = {}

    def one():
        plans.setdefault(persistent._final(persistent._built_plans(config, True, "auto")["backward"]).describe(), True)
        prepared = persistent.prepare(config, weights)
        return {"train": _train_ms(config, weights, x, h0, c0, prepared, repeats)}
    times = ab_modes.alternate_rounds(MODES, rounds, one)
    return {"hidden": hidden, "batch": batch, "layers": layers, "bidirectional": bidir, **times,
            "cudnn_train_ms": cudnn_train_ms(hidden, batch, layers, bidir, repeats), "plans": list(plans)}


def markdown(rows):
    lines = ["| fp32 cell | no groups fwd+bwd ms | v41 auto | cuDNN | auto vs cuDNN |", "|---|---|---|---|---|"]
    for r in rows:
        none, auto = np.median(r["none"]["train"]), np.median(r["auto"]["train"])
        lines.append(f"| H={r['hidden']} B={r['batch']} {r['layers']} layer(s){' bidirectional' if r['bidirectional'] else ''}"
                     f" | {none:.2f} | {auto:.2f} | {r['cudnn_train_ms']:.2f} | {r['cudnn_train_ms'] / auto:.2f}x |")
    return "\n".join(lines) + "\n\nBackward plans: " + "; ".join(p for r in rows for p in r["plans"]) + "\n"


def main(argv=None):
    args, out = bench_args(argv, repeats=10, configure=lambda p: p.add_argument("--rounds", type=int, default=2))
    measure_rows(out, "bench_backward_groups_layers_v41", bench_meta(), CELLS,
                 lambda *cell: measure(*cell, args.rounds, args.repeats), markdown)


if __name__ == "__main__":
    main()
