"""The planner's predictions against a bench's measurements, without a GPU: for each row of a
persistent bench JSON (bench_persistent.py: dtype, hidden, batch, steps, persistent_us, fused_us,
persistent_train_ms), the cost model's forward µs/step of both strategies on the named device, the
ratio predicted / measured, and whether the planner's pick is the measured faster one.

    python benchmarks/planner_vs_measured.py BENCH.json --device h100 [--out OUT_DIR]
Prints the table; with --out writes OUT_DIR/planner_vs_measured.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from ecornn import LSTMConfig  # noqa: E402
from ecornn.devices import KNOWN  # noqa: E402
from ecornn.run_plan import describe_plan  # noqa: E402

HEADER = ["| dtype | H | B | pick | persistent pred / meas (ratio) | fused pred / meas (ratio) | pick right | "
          "fwd+bwd persistent pred / meas (ratio) |", "|---|---|---|---|---|---|---|---|"]


def compare(row: dict, device) -> dict:
    config = LSTMConfig(row["hidden"], row["hidden"], 1, False, row["dtype"], row["batch"], row["steps"])
    forward = describe_plan(config, device)
    training = describe_plan(config, device, training=True)
    measured = {"persistent": row.get("persistent_us"), "fused": row.get("fused_us")}
    timed = {k: v for k, v in measured.items() if v}
    train_ms = row.get("persistent_train_ms")
    return {"dtype": row["dtype"], "hidden": row["hidden"], "batch": row["batch"], "pick": forward["strategy"],
            "predicted": forward["predictions"], "measured": measured,
            "pick_is_fastest": (forward["strategy"] == min(timed, key=timed.get)) if len(timed) == 2 else None,
            "train_predicted_us": training["predictions"].get("persistent"),
            "train_measured_us": train_ms * 1e3 / row["steps"] if train_ms else None}


def _pair(predicted, measured) -> str:
    if predicted is None or not measured:
        return "–"
    return f"{predicted:.2f} / {measured:.2f} ({predicted / measured:.2f})"


def markdown(rows: list) -> str:
    lines = list(HEADER)
    for r in rows:
        right = {True: "yes", False: "**no**", None: "–"}[r["pick_is_fastest"]]
        lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | {r['pick']} | "
                     f"{_pair(r['predicted'].get('persistent'), r['measured']['persistent'])} | "
                     f"{_pair(r['predicted'].get('fused'), r['measured']['fused'])} | {right} | "
                     f"{_pair(r['train_predicted_us'], r['train_measured_us'])} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", type=Path)
    parser.add_argument("--device", choices=sorted(KNOWN), required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    data = json.loads(args.bench.read_text())
    rows = [compare(row, KNOWN[args.device]) for row in data["rows"] if row.get("persistent_us")]
    table = markdown(rows)
    print(table, end="")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        meta = {"bench": str(args.bench), "bench_meta": data.get("meta"), "device": KNOWN[args.device].name}
        (args.out / "planner_vs_measured.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
        (args.out / "planner_vs_measured.md").write_text(f"{json.dumps(meta)}\n\n{table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
