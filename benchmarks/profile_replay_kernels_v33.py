"""v33: every GPU kernel and copy of a graph-replayed forward, by CUPTI (torch.profiler traces the whole
process, CuPy's kernels and graph nodes included), T=256, input = hidden, 1 layer, prepared weights.

Per row: the replays' summed device time per call, each kernel name's µs per call and count, and the
call's span (first start to last end). Timing the parts one by one from Python (v33's
profile_fp32_projection_v33.py) measures the host's launch pace for the small ones; this does not.

    python benchmarks/profile_replay_kernels_v33.py OUT_DIR [--repeats N]
Writes OUT_DIR/profile_replay_kernels_v33.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem, bench_args, bench_meta, measure_rows  # noqa: E402

ROWS = [("float32", 1024, 4), ("float32", 1024, 8), ("float32", 512, 4), ("bfloat16", 1024, 4), ("float16", 1024, 16)]


def profile(dtype, hidden, batch, repeats):
    import cupy as cp
    import torch
    from torch.profiler import ProfilerActivity
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    for _ in range(5):   # eager, capture, warm replays
        fwd()
    cp.cuda.Device().synchronize()
    with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            fwd()
            cp.cuda.Device().synchronize()   # one call at a time: its span is its own
    per_name = {}
    for a in prof.key_averages():   # device entries only: no torch op runs on the host
        t = getattr(a, "self_device_time_total", None)
        t = a.self_cuda_time_total if t is None else t
        if t > 0:
            per_name[a.key] = (t / repeats, a.count / repeats)
    total = sum(v[0] for v in per_name.values())
    top = sorted(per_name.items(), key=lambda kv: -kv[1][0])[:10]
    return {"dtype": dtype, "hidden": hidden, "batch": batch, "entries_per_call": sum(v[1] for v in per_name.values()),
            "device_us_per_call": total, "us_per_step": total / STEPS,
            "kernels": [{"name": n[:90], "us_per_call": v[0], "count_per_call": v[1]} for n, v in top]}


def markdown(rows) -> str:
    lines = []
    for r in rows:
        if "error" in r:
            lines += [f"**{r['dtype']} H={r['hidden']} B={r['batch']}**: {r['error']}", ""]
            continue
        lines.append(f"**{r['dtype']} H={r['hidden']} B={r['batch']}**: {r['device_us_per_call']:.1f} µs of device "
                     f"time per call ({r['us_per_step']:.2f} µs/step), {r['entries_per_call']:.1f} kernels and copies per call")
        lines.append("")
        lines.append("| kernel / copy | µs per call | per call |")
        lines.append("|---|---|---|")
        for k in r["kernels"]:
            lines.append(f"| `{k['name']}` | {k['us_per_call']:.1f} | {k['count_per_call']:.1f} |")
        lines.append("")
    return "\n".join(lines)


def mode_row(modes: dict, mode: str, dtype, hidden, batch, repeats) -> dict:
    """_row under the engine flags of ``modes[mode]`` (ab_modes), tagged with the mode (v35's and v48's A/B profiles)."""
    import ab_modes
    ab_modes.set_engine_flags(modes[mode])
    try:
        return {"mode": mode, **_row(dtype, hidden, batch, repeats)}
    finally:
        ab_modes.set_engine_flags({})


def mode_markdown(rows) -> str:
    return "\n".join(f"_{r['mode']}_\n\n" + markdown([r]) for r in rows)


def main(argv=None):
    args, out = bench_args(argv, repeats=10)
    measure_rows(out, "profile_replay_kernels_v33", bench_meta(), ROWS, lambda d, h, b: _row(d, h, b, args.repeats),
                 markdown)


def _row(dtype, hidden, batch, repeats):
    try:
        return profile(dtype, hidden, batch, repeats)
    except Exception as exc:   # recorded, never hidden
        return {"dtype": dtype, "hidden": hidden, "batch": batch, "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                "entries_per_call": 0, "device_us_per_call": 0.0, "us_per_step": 0.0, "kernels": []}


if __name__ == "__main__":
    main()
