"""Exploration (v16): fwd+bwd ms with the first poll's delay in no pass, the forward only (the rule),
and the forward and the backward (rules.POLL_DELAY_PASSES), per cell (T=256, CUDA events, median,
fresh prepared weights per mode so the training graphs are the mode's).

    python benchmarks/explore_backward_delay.py OUT_DIR [--repeats N]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _problem, bench_meta  # noqa: E402
from bench_persistent_v5 import _train_ms  # noqa: E402

from ecornn.engines import persistent, persistent_rules as rules  # noqa: E402

CELLS = [("float32", 512, 1), ("float32", 512, 2), ("float32", 768, 2), ("float32", 1024, 1),
         ("float16", 1024, 1), ("bfloat16", 1024, 1), ("bfloat16", 1024, 2)]
MODES = {"none": (False, ("forward",)), "forward": (True, ("forward",)), "both": (True, ("forward", "backward"))}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    rows = []
    for dtype, hidden, batch in CELLS:
        config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
        row = {"dtype": dtype, "hidden": hidden, "batch": batch}
        for mode, (enabled, passes) in MODES.items():
            persistent.POLL_DELAY, rules.POLL_DELAY_PASSES = enabled, passes
            try:
                plans = persistent.plans_for(config, True)
                row[f"{mode}_delays"] = {k: getattr(p, "poll_delay_ns", 0) for k, p in plans.items()}
                row[f"{mode}_train_ms"] = _train_ms(config, weights, x, h0, c0, persistent.prepare(config, weights),
                                                    args.repeats)
            finally:
                persistent.POLL_DELAY, rules.POLL_DELAY_PASSES = True, ("forward",)
        rows.append(row)
        print(dtype, hidden, batch, {m: round(row[f"{m}_train_ms"], 3) for m in MODES}, row["both_delays"], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "explore_backward_delay.json").write_text(json.dumps({"meta": bench_meta(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
