"""v37 diagnostic: where one forward step's time goes in the tensor-core kernel (kernels/step_clocks.cuh).

Per cell, the forward kernel alone (bench_persistent.kernel_launcher) is built twice: as the engine runs it and
with persistent.STEP_CLOCKS marks. Both are timed, alternated (the marks' own cost), then one marked launch's
record is read back and split into phases per block and step (medians over blocks and steps):

- stage: the step's top to a warp's staged vector (tagged plans: the polls, i.e. the wait for the other blocks,
  plus the loads; grid.sync plans: the loads alone), the median warp and the last one;
- product: a warp's staged vector to its finished mma product (median warp);
- partials: the last warp's product to the partials' block barrier;
- pointwise: the barrier to thread 0's published h (its sums over the warps, gates, stores);
- barrier: thread 0's published h to the step's end (grid.sync plans; ~0 for tagged ones);
- step: one step's top to the next's.
Across blocks, by the global timer: the spread of the blocks' publishes of one step, and the time from the last
publish of step s - 1 to a block's median warp having staged step s (the exchange's latency).

    python benchmarks/diag_step_clocks_v37.py OUT_DIR [--rounds N] [--repeats N] [--cells float16:1024:8 ...]
Writes OUT_DIR/diag_step_clocks_v37.{json,md}.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, bench_args, bench_meta, kernel_launcher, save_rows  # noqa: E402

CELLS = [("float32", 1024, 4), ("float32", 1024, 8), ("float16", 1024, 8), ("float16", 1024, 16),
         ("bfloat16", 1024, 4), ("bfloat16", 2048, 4)]
MARKED_STEPS = 32   # STEP_CLOCKS: steps recorded per block
SKIP_STEPS = 4      # the first steps (tiles loading, h0) are not the loop's steady state
THREAD_MARKS = ("top", "partials", "pointwise", "end", "top_ns", "published_ns", "entry_ns")   # kernels/step_clocks.cuh
# (entry_ns, v57: the kernel's entry, in step 0's marks only)


def clock_slots(warps: int) -> int:
    """Slots per (block, step) of the kernel's record: thread 0's, then staged / product / staged_ns per warp."""
    return len(THREAD_MARKS) + 3 * warps


def _since(later, earlier):
    """later - earlier of 32-bit clock readings (modulo 2^32, as signed int64: a reading up to 2^31 ticks before
    ``earlier`` comes out negative)."""
    diff = (np.asarray(later, np.int64) - np.asarray(earlier, np.int64)) & 0xFFFFFFFF
    return np.where(diff >= 1 << 31, diff - (1 << 32), diff)


def phases(record: np.ndarray, warps: int, skip: int = SKIP_STEPS) -> dict:
    """Median phase lengths (SM cycles, and ns by the clock rate the record itself gives) of a record
    [blocks][steps][clock_slots(warps)] of uint32 readings; steps [skip, steps - 1) are used (the last one
    has no next top)."""
    rec = np.asarray(record, np.int64)
    blocks, steps, slots = rec.shape
    if slots != clock_slots(warps):
        raise ValueError(f"record: expected {clock_slots(warps)} slots per step for {warps} warps, got {slots}")
    if steps - skip < 2:
        raise ValueError(f"record: expected more than {skip + 1} steps, got {steps}")
    t = len(THREAD_MARKS)
    use = slice(skip, steps - 1)
    top = rec[:, :, 0]
    rel = lambda x: _since(x, top[:, :, None] if x.ndim == 3 else top)[:, use]   # noqa: E731 (cycles after the top)
    staged, product = rel(rec[:, :, t:t + warps]), rel(rec[:, :, t + warps:t + 2 * warps])
    partials, pointwise, end = rel(rec[:, :, 1]), rel(rec[:, :, 2]), rel(rec[:, :, 3])
    step_cycles = _since(top[:, 1:], top[:, :-1])[:, skip:]
    step_ns = _since(rec[:, 1:, 4], rec[:, :-1, 4])[:, skip:]
    ghz = float(step_cycles.sum() / max(1, step_ns.sum()))
    cycles = {
        "stage_median_warp": np.median(np.median(staged, axis=2)),
        "stage_last_warp": np.median(staged.max(axis=2)),
        "product_median_warp": np.median(np.median(product - staged, axis=2)),
        "partials": np.median(partials - product.max(axis=2)),
        "pointwise": np.median(pointwise - partials),
        "barrier": np.median(end - pointwise),
        "step": np.median(step_cycles),
    }
    ns = {k: float(v) / ghz for k, v in cycles.items()}
    # Across blocks (global timer): the publishes of step s - 1, and when block b's median warp staged step s.
    pub = rec[:, skip - 1:steps - 2, 5]
    staged_mid = np.median(rec[:, use, t + 2 * warps:], axis=2)
    last_pub = pub.max(axis=0)   # ns of one global timer: comparable across blocks
    ns["publish_spread"] = float(np.median(_since(last_pub, pub.min(axis=0))))
    ns["last_publish_to_staged"] = float(np.median(_since(staged_mid, last_pub[None, :])))
    ticks = np.diff(np.unique(rec[:, :, 4].ravel()))
    return {"cycles": {k: float(v) for k, v in cycles.items()}, "ns": ns, "ghz": ghz,
            "timer_resolution_ns": float(ticks.min()) if ticks.size else None,
            "blocks": blocks, "steps_used": steps - 1 - skip}


def parse_cell(text: str) -> tuple:
    """("float16", 1024, 8) from "float16:1024:8" (dtype:hidden:batch), or ValueError naming what was expected."""
    parts = text.split(":")
    if len(parts) != 3 or parts[0] not in ("float32", "float16", "bfloat16") or not all(p.isdigit() for p in parts[1:]):
        raise ValueError(f"cell: expected dtype:hidden:batch (dtype float32, float16 or bfloat16), got {text!r}")
    return parts[0], int(parts[1]), int(parts[2])


def _record(plan, blocks: int):
    """The marks of the latest launch of ``plan``'s marked build (persistent.STEP_CLOCKS steps),
    ([blocks][steps][slots] uint32, the final plan)."""
    from ecornn.engines import persistent
    steps = persistent.STEP_CLOCKS
    if not steps:
        raise ValueError("_record: persistent.STEP_CLOCKS is 0, so no build has marks")
    import cupy as cp
    final, where = persistent.kernel_global(plan, "ecornn_step_clocks")
    slots = clock_slots(final.warps)
    flat = cp.ndarray((blocks * steps * slots,), cp.uint32, memptr=where)
    return cp.asnumpy(flat).reshape(blocks, steps, slots), final


def measure_cell(dtype, hidden, batch, rounds, repeats):
    import cupy as cp
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    plan = persistent.plans_for(config, False)["forward"]
    launchers = {}
    for marks in (0, MARKED_STEPS):
        persistent.STEP_CLOCKS = marks
        launchers[marks] = (kernel_launcher(config, prepared, x, h0, c0, plan), persistent._final(plan))
    times = {0: [], MARKED_STEPS: []}
    try:
        for r in range(rounds):
            for marks in ((0, MARKED_STEPS) if r % 2 == 0 else (MARKED_STEPS, 0)):
                persistent.STEP_CLOCKS = marks
                times[marks].append(_median_ms(launchers[marks][0], repeats) * 1e3 / STEPS)
        persistent.STEP_CLOCKS = MARKED_STEPS
        launchers[MARKED_STEPS][0]()
        cp.cuda.Device().synchronize()
        record, final = _record(plan, launchers[MARKED_STEPS][1].grid)
    finally:
        persistent.STEP_CLOCKS = 0
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "plan": final.describe(),
           "kernel_us": float(np.median(times[0])), "marked_kernel_us": float(np.median(times[MARKED_STEPS])),
           "plan_unmarked": launchers[0][1].describe()}
    row.update(phases(record, final.warps))
    return row


def markdown(rows) -> str:
    head = ("| cell | kernel µs/step | marked | GHz | stage (median / last warp) | product | partials | pointwise | "
            "barrier | step | publish spread | last publish → staged |")
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {r['error']} |" + " |" * 10)
            continue
        n = r["ns"]
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {r['kernel_us']:.2f} | {r['marked_kernel_us']:.2f} | "
                     f"{r['ghz']:.2f} | {n['stage_median_warp']:.0f} / {n['stage_last_warp']:.0f} | "
                     f"{n['product_median_warp']:.0f} | {n['partials']:.0f} | {n['pointwise']:.0f} | {n['barrier']:.0f} | "
                     f"{n['step']:.0f} | {n['publish_spread']:.0f} | {n['last_publish_to_staged']:.0f} |")
    return "\n".join(lines) + "\n\nns (SM cycles / the record's GHz); medians over blocks and steps.\n"


def cell_args(argv, cells):
    """(args, out dir) of a bench over --cells dtype:hidden:batch ... (default ``cells``), --rounds alternated."""
    def configure(parser):
        parser.add_argument("--rounds", type=int, default=4)
        parser.add_argument("--cells", nargs="+", type=parse_cell, default=cells, help="dtype:hidden:batch ...")
        parser.add_argument("--flags", type=json.loads, default={},
                            help='engine flags for every cell, a JSON object (v42: {"CLUSTER_K": 2, ...})')
    return bench_args(argv, repeats=10, configure=configure)


def main(argv=None):
    args, out = cell_args(argv, CELLS)
    from ecornn.engines import persistent
    for flag, value in args.flags.items():
        setattr(persistent, flag, value)
    meta = {**bench_meta(), "flags": args.flags}
    rows = []
    for cell in args.cells:
        try:
            rows.append(measure_cell(*cell, args.rounds, args.repeats))
        except Exception as exc:   # one cell's failure (a build, a launch) must not lose the others
            rows.append({"dtype": cell[0], "hidden": cell[1], "batch": cell[2], "error": f"{type(exc).__name__}: {exc}"})
        print(rows[-1], flush=True)
        save_rows(out, "diag_step_clocks_v37", meta, rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
