"""v38: the 16-bit H=1792-2048 B <= 4 forwards with 8 warps per block instead of 16 (the same units per block). Half the
warps hold twice the registers each: 9-11 of 16 k-tiles per warp in registers (nvcc: 11 spill-free at 253
registers) instead of 4 of 8, so a step reads ~80 KB of shared-memory tiles per block instead of 128 KB (v37's
clocks: a 1.2 us product there). Costs: accumulator chains twice as long, 2 warps per scheduler, 8 staging loads
per lane. Kernel alone, T=256, alternated rounds, CUDA events (bench_persistent._recurrence_ms).

    python benchmarks/explore_h2048_warps_v38.py OUT_DIR [--rounds N] [--repeats N] [--cells bfloat16:2048:4 ...]
Writes OUT_DIR/explore_h2048_warps_v38.{json,md}.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem, _recurrence_ms, bench_meta, save_rows  # noqa: E402
from diag_step_clocks_v37 import cell_args  # noqa: E402

CELLS = [("bfloat16", 2048, 4), ("float16", 2048, 4), ("bfloat16", 1792, 4), ("bfloat16", 2048, 2),
         ("bfloat16", 2048, 1), ("float16", 1792, 2), ("bfloat16", 2048, 3)]


def _pick(config, reg_model):
    """The engine's tensor-core forward plan choice under the register model ``reg_model``, with its first-poll
    delay rule."""
    from ecornn.engines import persistent_capacity as cap
    from ecornn.gpu import device_properties
    return cap.with_poll_delay(cap._mma_plan_for_directions(device_properties(), "forward", config.dtype,
                                                            config.hidden_size, config.batch, 1, reg_model))


def ranked_pick(config):
    """The plan the v19 register model ranks first (mma_step_clocks), no v4 pick kept ("v19-ranked")."""
    return _pick(config, "v19-ranked")


def v4_pick(config):
    """The v4 register model's (warps, units) with v19's register tiles: what the engine ran before v38."""
    return _pick(config, "v19-kept")


def variants(config):
    """{name: plan}: the engine's pick, the v19 ranking's pick with its exchange and with the other one (call 5: 8
    warps under grid.sync beat the 16-warp pick at H=2048 B=4), and from call 10 the v4 model's (warps, units)."""
    from ecornn.engines import persistent, persistent_capacity as cap
    chosen = persistent.plans_for(config, False)["forward"]
    ranked = ranked_pick(config)
    other = cap.with_poll_delay(replace(ranked, tagged=not ranked.tagged, poll_delay_ns=0, poll_spin_cycles=0))
    old = v4_pick(config)
    return {"engine": chosen, f"ranked {ranked.warps} warps": ranked,
            f"ranked, {'grid.sync' if ranked.tagged else 'tagged'}": other, f"v4 pick ({old.warps} warps)": old}


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
    args, out = cell_args(argv, CELLS)
    rows = []
    for cell in args.cells:
        rows += explore(*cell, args.rounds, args.repeats)
        save_rows(out, "explore_h2048_warps_v38", bench_meta(), rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
