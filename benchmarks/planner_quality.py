"""How good are the planner's picks? Re-plans every cell of a sweep (measured on a GPU) with the
cost model fitted to it, and reports the share of cells whose pick is within 10% of the fastest
measured strategy and the worst pick/best ratio — in-sample, and leave-one-cell-out (the model fitted
without the cell it is asked about). Runs on the CPU.

    python benchmarks/planner_quality.py benchmarks/results/planner_sweep_h200.json --device h200
"""
import argparse
import json

from ecornn import LSTMConfig
from ecornn.calibrate import fit_constants, measurements_from_sweep
from ecornn.devices import KNOWN
from ecornn.planner import plan
from ecornn.sweep import Cell, plot

STRATEGIES = ("persistent", "fused")


def pick_ratio(cell, device, consts, seq_len):
    config = LSTMConfig(cell["hidden"], cell["hidden"], dtype=cell["dtype"], batch=cell["batch"],
                        seq_len=seq_len)
    chosen = plan(config, "auto", cell["mode"] == "training", device=device, constants=consts)
    measured = {s: cell.get(f"{s}_us") for s in STRATEGIES if cell.get(f"{s}_us")}
    got = measured.get(chosen.strategy)
    return chosen.strategy, (got / min(measured.values())) if got else float("inf")


def summary(ratios):
    return {"cells": len(ratios), "within_10pct": sum(r <= 1.10 for r in ratios) / len(ratios),
            "worst": max(ratios)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep")
    parser.add_argument("--device", choices=sorted(KNOWN), required=True)
    parser.add_argument("--out", help="write the report as JSON")
    parser.add_argument("--plot", metavar="PNG", help="µs/step vs batch with the refitted planner's picks")
    args = parser.parse_args()
    data, device = json.load(open(args.sweep)), KNOWN[args.device]
    seq_len = data["meta"].get("seq_len", 256)
    measurements = measurements_from_sweep(args.sweep)
    consts = fit_constants(measurements, device)
    rows, in_sample, held_out = [], [], []
    for cell in data["cells"]:
        pick, ratio = pick_ratio(cell, device, consts, seq_len)
        key = (cell["hidden"], cell["batch"], cell["dtype"], cell["mode"] == "training")
        rest = [m for m in measurements if (m["hidden"], m["batch"], m["dtype"], m["training"]) != key]
        _, held = pick_ratio(cell, device, fit_constants(rest, device), seq_len)
        in_sample.append(ratio)
        held_out.append(held)
        rows.append({**{k: cell[k] for k in ("dtype", "mode", "hidden", "batch")}, "pick": pick,
                     "pick_over_best": ratio, "held_out_pick_over_best": held,
                     **{f"{s}_us": cell.get(f"{s}_us") for s in STRATEGIES}, "cudnn_us": cell.get("cudnn_us")})
    report = {"device": data["meta"].get("device"), "constants": consts.to_json(),
              "in_sample": summary(in_sample), "leave_one_out": summary(held_out), "cells": rows}
    print("dtype | mode | H | B | persistent us | fused us | cuDNN us | pick | pick/best | held-out")
    for r in rows:
        fmt = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
        print(f"{r['dtype']} | {r['mode']} | {r['hidden']} | {r['batch']} | {fmt(r['persistent_us'])} | "
              f"{fmt(r['fused_us'])} | {fmt(r['cudnn_us'])} | {r['pick']} | {r['pick_over_best']:.2f} | "
              f"{r['held_out_pick_over_best']:.2f}")
    for name in ("in_sample", "leave_one_out"):
        s = report[name]
        print(f"{name}: pick within 10% of the fastest in {s['within_10pct']:.1%} of {s['cells']} cells; "
              f"worst pick/best {s['worst']:.2f}")
    if args.out:
        json.dump(report, open(args.out, "w"), indent=2)
    if args.plot:
        cells = [Cell(r["hidden"], r["batch"], r["dtype"], r["mode"],
                      us={s: r[f"{s}_us"] for s in STRATEGIES}, cudnn_us=r["cudnn_us"], pick=r["pick"])
                 for r in rows]
        plot(cells, args.plot, STRATEGIES, sync_floor_us=1.0)


if __name__ == "__main__":
    main()
