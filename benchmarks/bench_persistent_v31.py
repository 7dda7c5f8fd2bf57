"""v31 bench: a training call (forward with training=True, then the backward; T=256, input = hidden,
prepared weights, so both replay their training graphs) of the persistent engine against cuDNN's
(torch.nn.LSTM, PyTorch defaults, x and weights requiring gradients), alternated row by row for
--rounds rounds in one process. The ecornn imported is whichever is on PYTHONPATH first: run it once
against the v30 tree for the "before" numbers (its ratios to cuDNN come from its own process).

    python benchmarks/bench_persistent_v31.py OUT_DIR [--rounds N] [--repeats N] [--name NAME]
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _median_ms, bench_args, bench_meta, cudnn_times, save_rows, training_call  # noqa: E402

ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 1024, 8), ("float16", 512, 16),
        ("float16", 256, 32)]


def training_ms(dtype, hidden, batch, repeats):
    """Median ms of one training call (bench_persistent.training_call) on prepared weights."""
    return _median_ms(training_call(dtype, hidden, batch, seed=hidden + batch)[0], repeats)


def markdown(rows) -> str:
    lines = ["| cell | ecornn fwd+bwd ms (rounds) | cuDNN ms (rounds) | median ratio |", "|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {r['error']} | | |")
            continue
        ours = " / ".join(f"{v:.3f}" for v in r["ecornn_ms"])
        theirs = " / ".join(f"{v:.3f}" for v in r["cudnn_ms"])
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {ours} | {theirs} | {r['ratio']:.3f}x |")
    return "\n".join(lines)


def main(argv=None):
    def configure(parser):
        parser.add_argument("--rounds", type=int, default=3)
        parser.add_argument("--name", default="persistent_v31_bench")
    args, out = bench_args(argv, repeats=15, configure=configure)
    import ecornn
    meta = {**bench_meta(), "ecornn": str(Path(ecornn.__file__).resolve().parent)}
    rows = [{"dtype": d, "hidden": h, "batch": b, "ecornn_ms": [], "cudnn_ms": []} for d, h, b in ROWS]
    for _ in range(args.rounds):
        for r in rows:
            if "error" in r:
                continue
            try:
                r["ecornn_ms"].append(training_ms(r["dtype"], r["hidden"], r["batch"], args.repeats))
                r["cudnn_ms"].append(cudnn_times(r["dtype"], r["hidden"], r["batch"], repeats=args.repeats)[1])
            except Exception as exc:   # recorded, never hidden
                r["error"] = f"{type(exc).__name__}: {exc}"
            if "error" not in r:
                r["ratio"] = float(np.median(r["cudnn_ms"]) / np.median(r["ecornn_ms"]))
        save_rows(out, args.name, meta, rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
