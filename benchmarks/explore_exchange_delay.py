"""Exploration (v26): the tensor-core forward's kernel alone at the issue's missed cells (fp16 H=1024
B=8/16, fp32 H=1024 B=4/8 on the split) under either exchange, the tagged one with first-poll delays
(v16/v18 tried them only at B <= 4), for the (warps, units) plans of 8 and 16 warps, and with the
in-kernel projection (16-bit). Rounds alternate over the variants (after a warm-up round), so a
slow machine phase hits every variant alike. v28: the fp32 split's v13 rows exchange against its
split words (--rows-delays), the chosen fp32 plan with expf / tanhf gates (--libm-gates). Per variant: the median over rounds of each round's
median kernel µs/step (T=256, CUDA events).

    python benchmarks/explore_exchange_delay.py OUT_DIR [--rounds N] [--repeats N] [--cells JSON] [--delays JSON]
        [--only JSON] [--name NAME] [--unit-scales JSON] [--rows-delays JSON] [--libm-gates] [--groups JSON]
Writes OUT_DIR/NAME.json (default explore_exchange_delay) after every round.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, bench_meta, kernel_launcher  # noqa: E402

CELLS = [("float16", 1024, 8), ("float16", 1024, 16), ("float32", 1024, 4), ("float32", 1024, 8)]
DELAYS = [0, 400, 800]
WARPS = (8, 16)


LIBM_GATES = [False]   # --libm-gates: also the chosen fp32 plan with v1-v27's expf / tanhf gates (v28's ablation)


GROUPS = [1]   # --groups: also the v30 grouped forwards (the batch as 2 groups on blocks of their own)


def plan_variants(props, config, delays, unit_scales=(1,), rows_delays=()):
    """(name, plan) pairs: per warps choice and units per block (the fewest that fit times each of
    ``unit_scales``: 2 halves the blocks), grid.sync, tagged at each delay, and the in-kernel
    projection under either exchange (16-bit; v29: the fp32 split too, "proj"). fp32 split: tagged
    with v28's split words at ``delays``, with v13's hi and lo rows ("rows tagged") at ``rows_delays``.
    v30 (--groups 2): the same for the batch as 2 groups of B/2 on half the SMs each ("g2 ...")."""
    from ecornn.engines import persistent, persistent_capacity as cap
    chosen = persistent.plans_for(config, False)["forward"]
    yield "chosen", chosen
    if LIBM_GATES and config.dtype == "float32":
        yield "chosen libm gates", chosen   # built with persistent.FAST_FP32_GATES off (launchers)
    for groups in GROUPS:
        if groups == 1 or (config.dtype != "float32" and config.batch % groups == 0
                           and config.batch // groups >= cap.BATCH_GROUP_MIN):
            yield from _tiled_variants(props, config, delays, unit_scales, rows_delays, groups)


def _tiled_variants(props, config, delays, unit_scales, rows_delays, groups):
    from ecornn.engines import persistent_capacity as cap
    batch = config.batch // groups
    smallest = -(-config.hidden_size // (props["sm_count"] // groups))
    rows = cap.mma_parts(config.dtype) * batch   # rows of the exchanged vector
    for warps, scale in [(w, k) for w in (WARPS if rows <= 8 else WARPS[-1:])   # 8 warps at 16 rows: 16 polls
                         for k in unit_scales]:
        base = next((p for units in range(smallest * scale, smallest * scale + 8)
                     for p in [cap._mma_candidate(props, "forward", config.dtype, config.hidden_size,
                                                  batch, 1, warps, units)] if p is not None), None)
        if base is None:
            continue
        base = replace(base, batch_groups=groups)
        tag = f"{'' if groups == 1 else f'g{groups} '}w{warps}u{base.units}"
        yield f"{tag} grid.sync", replace(base, tagged=False, poll_delay_ns=0)
        for delay in delays:
            yield f"{tag} tagged {delay}ns", replace(base, tagged=True, poll_delay_ns=delay)
        for delay in rows_delays if base.parts == 2 else ():
            yield f"{tag} rows tagged {delay}ns", replace(base, tagged=True, poll_delay_ns=delay, split_words=False)
        projected = cap.with_input_projection(props, base, [config.input_size])
        if projected.input_k_tiles:
            yield f"{tag} proj grid.sync", replace(projected, tagged=False, poll_delay_ns=0)
            for delay in delays:
                yield f"{tag} proj tagged {delay}ns", replace(projected, tagged=True, poll_delay_ns=delay)


def _under_gates(fast: bool, launch):
    """``launch`` with persistent.FAST_FP32_GATES set to ``fast`` first (the engine looks its kernel
    up under the flag at every launch)."""
    from ecornn.engines import persistent

    def run():
        persistent.FAST_FP32_GATES = fast
        return launch()
    return run


def launchers(cell, delays, only, unit_scales, rows_delays=()):
    from ecornn.engines import persistent
    from ecornn.gpu import device_properties
    dtype, hidden, batch = cell
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    out = {}
    for name, plan in plan_variants(device_properties(), config, delays, unit_scales, rows_delays):
        if only and not any(part in name for part in only):
            continue
        fast_gates = "libm gates" not in name
        persistent.FAST_FP32_GATES = fast_gates
        try:
            built = persistent._final(plan)
            out[name] = (_under_gates(fast_gates, kernel_launcher(config, prepared, x, h0, c0, plan)),
                         {"warps": built.warps, "units": built.units, "k_tiles": getattr(built, "k_tiles", None),
                          "tagged": built.tagged, "poll_delay_ns": built.poll_delay_ns,
                          "split_words": getattr(built, "split_words", None) if built.kind == "mma" else None,
                          "in_kernel_projection": built.in_kernel_projection})
        except Exception as exc:   # NotSupported (spills, co-residency): recorded
            out[name] = (None, {"error": f"{type(exc).__name__}: {str(exc)[:200]}"})
        print(cell, name, out[name][1], flush=True)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--cells", type=json.loads, default=CELLS)
    parser.add_argument("--delays", type=json.loads, default=DELAYS)
    parser.add_argument("--only", type=json.loads, default=[], help="JSON list: variants whose name has one of these")
    parser.add_argument("--name", default="explore_exchange_delay")
    parser.add_argument("--rows-delays", type=json.loads, default=[],
                        help="JSON list: delays of the fp32 split's v13 rows exchange (v28's ablation)")
    parser.add_argument("--libm-gates", action="store_true",
                        help="also the chosen fp32 plan with expf / tanhf gates (FAST_FP32_GATES off)")
    parser.add_argument("--unit-scales", type=json.loads, default=[1], help="JSON list, e.g. [1, 2]")
    parser.add_argument("--groups", type=json.loads, default=[1], help="JSON list of batch groups, e.g. [1, 2]")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    LIBM_GATES[0] = args.libm_gates
    GROUPS[:] = args.groups
    meta = bench_meta()
    cells = {tuple(c): launchers(tuple(c), args.delays, args.only, args.unit_scales, args.rows_delays)
             for c in args.cells}
    times = {c: {n: [] for n, (fn, _) in v.items() if fn} for c, v in cells.items()}
    for rnd in range(args.rounds + 1):   # round 0 warms up
        for cell, variants in cells.items():
            for name, (fn, _) in variants.items():
                if fn:
                    us = _median_ms(fn, args.repeats) * 1e3 / STEPS
                    if rnd:
                        times[cell][name].append(us)
        rows = [{"dtype": c[0], "hidden": c[1], "batch": c[2], "variant": n, **info,
                 "rounds_us": times[c].get(n, []),
                 "median_us": float(np.median(times[c][n])) if times[c].get(n) else None}
                for c, v in cells.items() for n, (_, info) in v.items()]
        (out / f"{args.name}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    for r in rows:
        med = f"{r['median_us']:.2f}" if r["median_us"] else r.get("error", "-")
        print(f"{r['dtype']} H={r['hidden']} B={r['batch']} {r['variant']}: {med}", flush=True)


if __name__ == "__main__":
    main()
