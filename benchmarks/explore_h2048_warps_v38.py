"""v38: the 16-bit H=2048 B=4 forward with 8 warps per block instead of 16 (16 units per block either way). Half the
warps hold twice the registers each: 9-11 of 16 k-tiles per warp in registers (nvcc: 11 spill-free at 253
registers) instead of 4 of 8, so a step reads ~80 KB of shared-memory tiles per block instead of 128 KB (v37's
clocks: a 1.2 us product there). Costs: accumulator chains twice as long, 2 warps per scheduler, 8 staging loads
per lane. Kernel alone, T=256, alternated rounds, CUDA events (bench_persistent._recurrence_ms).

    python benchmarks/explore_h2048_warps_v38.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/explore_h2048_warps_v38.{json,md}.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem, _recurrence_ms, bench_args, bench_meta, save_rows  # noqa: E402

CELLS = [("bfloat16", 2048, 4), ("float16", 2048, 4)]


def variants(config):
    """{name: plan}: the engine's pick and 8-warp plans (tagged with the pick's first-poll delay, without, grid.sync;
    the register model's k-tiles and 11)."""
    from ecornn.engines import persistent, persistent_capacity as cap
    from ecornn.gpu import device_properties
    chosen = persistent.plans_for(config, False)["forward"]
    eight = cap._mma_candidate(device_properties(), "forward", config.dtype, config.hidden_size, config.batch, 1, 8,
                               chosen.units)
    tagged = replace(eight, tagged=True, poll_delay_ns=chosen.poll_delay_ns, poll_spin_cycles=chosen.poll_spin_cycles)
    return {"16 warps (engine)": chosen, "8 warps tagged": tagged,
            "8 warps tagged, 11 reg": replace(tagged, reg_k_tiles=11),
            "8 warps tagged, no delay": replace(tagged, poll_delay_ns=0, poll_spin_cycles=0),
            "8 warps grid.sync": replace(eight, tagged=False, poll_delay_ns=0, poll_spin_cycles=0)}


def explore(dtype, hidden, batch, rounds, repeats):
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    plans = variants(config)
    times = {name: [] for name in plans}
    built = {}
    for _ in range(rounds + 1):   # the first round (builds, warm-up) is dropped
        for name, plan in plans.items():
            try:
                t = _recurrence_ms(config, prepared, x, h0, c0, plan) * 1e3 / STEPS
                built[name] = persistent._final(plan)
            except Exception as exc:   # NotSupported (spills past shared memory, co-residency): recorded
                built[name], t = f"{type(exc).__name__}: {str(exc)[:160]}", float("nan")
            times[name].append(t)
    return [{"dtype": dtype, "hidden": hidden, "batch": batch, "mode": name, "us": times[name][1:],
             "plan": str(built[name].describe() if hasattr(built[name], "describe") else built[name])}
            for name in plans]


def markdown(rows):
    lines = ["| cell | plan | kernel µs/step (median; rounds) | built |", "|---|---|---|---|"]
    for r in rows:
        us = r["us"]
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {r['mode']} | {np.median(us):.3f} "
                     f"({', '.join(f'{v:.2f}' for v in us)}) | {r['plan']} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    args, out = bench_args(argv, repeats=10, configure=lambda p: p.add_argument("--rounds", type=int, default=4))
    rows = []
    for cell in CELLS:
        rows += explore(*cell, args.rounds, args.repeats)
        save_rows(out, "explore_h2048_warps_v38", bench_meta(), rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
