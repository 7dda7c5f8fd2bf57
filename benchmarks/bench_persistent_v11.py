"""v11 benchmark: the tensor-core kernels' exchange between steps, three ways, against cuDNN in the
same process (torch.nn.LSTM, PyTorch defaults). Per row (T=256, 1 layer, input=hidden, random
non-zero inputs, CUDA events, median): the forward kernel alone with the plain tagged exchange,
grid.sync() and the tagged words behind an arrival counter; the whole forward (graph replay) and fwd+bwd ms with the default plans and with
each exchange forced; cuDNN's forward µs/step and fwd+bwd ms.

    python benchmarks/bench_persistent_v11.py OUT_DIR [--repeats N] [--rows N] [--name NAME]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v11_bench) and prints the table.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, TARGETS, _median_ms, _problem, add_cudnn, bench_meta, fmt, kernel_launcher, save_rows  # noqa: E402
from bench_persistent_v5 import _train_ms  # noqa: E402

ROWS = [("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 1024, 4), ("bfloat16", 2048, 4),
        ("bfloat16", 512, 8), ("float16", 1024, 1), ("bfloat16", 1024, 12)]
# (name, TAGGED_EXCHANGE, COUNTED_EXCHANGE)
EXCHANGES = [("tagged", True, False), ("grid_sync", False, False), ("counted", True, True)]


def _exchange_plan(plan, tagged, counted):
    return plan.with_exchange(tagged).with_counter(counted)


def measure(dtype, hidden, batch, repeats):
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    plans = persistent.plans_for(config, True)
    out = {"default": {k: ("counted" if p.counted else "tagged" if p.tagged else "grid_sync") for k, p in plans.items()}}
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    out["graph_fwd_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
    out["train_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
    for name, tagged, counted in EXCHANGES:
        plan = _exchange_plan(plans["forward"], tagged, counted)
        out[f"kernel_{name}_us"] = _median_ms(kernel_launcher(config, prepared, x, h0, c0, plan), repeats) * 1e3 / STEPS
        persistent.TAGGED_EXCHANGE, persistent.COUNTED_EXCHANGE = tagged, counted
        try:
            out[f"graph_fwd_{name}_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
            out[f"train_{name}_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
        finally:
            persistent.TAGGED_EXCHANGE, persistent.COUNTED_EXCHANGE = "auto", "auto"
    return out


def row(dtype, hidden, batch, repeats):
    entry = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": STEPS,
             "target_us": TARGETS.get((dtype, hidden, batch))}
    try:
        entry.update(measure(dtype, hidden, batch, repeats))
    except Exception as exc:  # recorded, never hidden
        entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return add_cudnn(entry, dtype, hidden, batch, repeats)


def markdown(rows):
    names = [n for n, _, _ in EXCHANGES]
    head = ("| dtype | H | B | default fwd/bwd | fwd µs/step | target | " + " | ".join(f"kernel {n}" for n in names)
            + " | " + " | ".join(f"fwd {n}" for n in names) + " | cuDNN fwd | fwd+bwd ms | "
            + " | ".join(f"fwd+bwd {n}" for n in names) + " | cuDNN fwd+bwd | fwd vs cuDNN | fwd+bwd vs cuDNN |")
    lines = [head, "|" + "---|" * (13 + 3 * len(names) - 3)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | error: {r['error'][:200]} |")
            continue
        g, c, t, ct = r.get("graph_fwd_us"), r.get("cudnn_us"), r.get("train_ms"), r.get("cudnn_train_ms")
        cells = [r["dtype"], str(r["hidden"]), str(r["batch"]), "/".join(r["default"].values()), fmt(g),
                 fmt(r.get("target_us"), ".1f")]
        cells += [fmt(r.get(f"kernel_{n}_us")) for n in names] + [fmt(r.get(f"graph_fwd_{n}_us")) for n in names]
        cells += [fmt(c), fmt(t)] + [fmt(r.get(f"train_{n}_ms")) for n in names] + [fmt(ct)]
        cells += [fmt(c / g if c and g else None) + "x", fmt(ct / t if ct and t else None) + "x"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rows", type=int, default=len(ROWS))
    parser.add_argument("--name", default="persistent_v11_bench")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    rows = []
    for dtype, hidden, batch in ROWS[:args.rows]:
        rows.append(row(dtype, hidden, batch, args.repeats))
        print(rows[-1], flush=True)
        save_rows(out, args.name, meta, rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
