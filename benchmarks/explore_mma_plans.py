"""Kernel-only forward µs/step of alternative tensor-core plans (warps x units per block) with either
exchange, next to the capacity model's pick: the data behind the plan ranking (mma_step_clocks)
and tagged_exchange_pays. T=256, 1 layer, random inputs, CUDA events, median.

    python benchmarks/explore_mma_plans.py OUT_DIR [--repeats N]
Writes OUT_DIR/mma_plan_explore.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem, _recurrence_ms, bench_meta, save_rows  # noqa: E402

CONFIGS = [("bfloat16", 1024, 4), ("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 2048, 4)]
WARPS = (16, 8)        # 4-warp plans rank last in the model everywhere here
UNIT_SCALES = (1, 2)   # the fewest units per block that fit, and twice that (half the blocks)


def candidates(props, config):
    from ecornn.engines import persistent_capacity as cap
    hidden, batch = config.hidden_size, config.batch
    smallest = -(-hidden // props["sm_count"])
    seen = set()
    for warps in WARPS:
        for scale in UNIT_SCALES:
            for units in range(smallest * scale, smallest * scale + 8):
                plan = cap._mma_candidate(props, "forward", config.dtype, hidden, batch, 1, warps, units)
                if plan is not None:
                    if (warps, plan.units) not in seen:
                        seen.add((warps, plan.units))
                        yield plan
                    break


def explore(dtype, hidden, batch, repeats):
    from ecornn.engines import persistent, persistent_capacity as cap
    from ecornn.gpu import device_properties
    props = device_properties()
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    chosen = persistent.plans_for(config, False)["forward"]
    rows = []
    for plan in candidates(props, config):
        entry = {"dtype": dtype, "hidden": hidden, "batch": batch, "warps": plan.warps, "units": plan.units,
                 "blocks": plan.grid, "k_tiles": plan.k_tiles, "m_tiles": plan.m_tiles,
                 "model_clocks": cap.mma_step_clocks(plan),
                 "chosen": (plan.warps, plan.units) == (chosen.warps, chosen.units)}
        for tagged in (True, False):
            key = "tagged_us" if tagged else "grid_sync_us"
            try:
                entry[key] = _recurrence_ms(config, prepared, x, h0, c0, replace(plan, tagged=tagged)) * 1e3 / STEPS
            except Exception as exc:  # NotSupported (spills, co-residency): recorded
                entry[key + "_error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        rows.append(entry)
        print(json.dumps(entry), flush=True)
    return rows


def markdown(rows):
    lines = ["| dtype | H | B | warps | units | blocks | k_tiles x m_tiles | model clocks | tagged µs | grid.sync µs | pick |",
             "|" + "---|" * 11]
    for r in rows:
        f = lambda k: f"{r[k]:.2f}" if k in r else "err"  # noqa: E731
        lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | {r['warps']} | {r['units']} | {r['blocks']} | "
                     f"{r['k_tiles']} x {r['m_tiles']} | {r['model_clocks']:.0f} | {f('tagged_us')} | "
                     f"{f('grid_sync_us')} | {'*' if r['chosen'] else ''} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    rows = []
    for dtype, hidden, batch in CONFIGS:
        rows += explore(dtype, hidden, batch, args.repeats)
        save_rows(out, "mma_plan_explore", meta, rows)   # after every configuration
    table = markdown(rows)
    save_rows(out, "mma_plan_explore", meta, rows, table)
    print(table)


if __name__ == "__main__":
    main()
