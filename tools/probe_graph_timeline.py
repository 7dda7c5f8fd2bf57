"""Probe (v23): where a replayed inference forward's span goes, node by node. For each cell, a
prepared forward is called through `persistent.forward` until its graph replays, then a few calls
are traced by CUPTI (torch.profiler): every kernel, memcpy and memset with its GPU start and
duration, relative to the call's first GPU operation, plus the host time from the call's start to
its first GPU operation. Also the forward kernel alone after a device write of 0, 2, 8 or 32 MB
(does a large write just before a cooperative kernel slow it, as v21 saw? v23: the kernels that read
x each step did, by up to 88 us; v24 prefetches x into L2 at their start).

    python tools/probe_graph_timeline.py OUT_DIR
Writes OUT_DIR/probe_graph_timeline.{json,md}.
"""
import json
import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_persistent import STEPS, _problem, bench_meta, kernel_launcher  # noqa: E402

CELLS = [("bfloat16", 1024, 4), ("float32", 512, 4), ("bfloat16", 2048, 4), ("float16", 1024, 8),
         ("float16", 1024, 16),
         ("float32", 512, 1)]   # v24: the grid kernel's in-kernel projection (reads fp32 x each step)
CALLS = 6
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _traced(fn, calls):
    """Chrome-trace events of ``calls`` calls of ``fn``, each under a 'call' annotation, a sync between."""
    from torch.profiler import ProfilerActivity, profile, record_function
    path = Path("/tmp/probe_graph_timeline_trace.json")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            cp.cuda.Device().synchronize()
            with record_function("call"):
                fn()
            cp.cuda.Device().synchronize()
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())["traceEvents"]


def _per_call(events):
    """[(host µs to the first GPU op, span µs, [(name, start µs, duration µs)])] per traced call."""
    calls = sorted((e for e in events if e.get("name") == "call" and e.get("ph") == "X"), key=lambda e: e["ts"])
    gpu = sorted((e for e in events if e.get("cat") in GPU_CATS and e.get("ph") == "X"), key=lambda e: e["ts"])
    out = []
    for i, call in enumerate(calls):
        end = calls[i + 1]["ts"] if i + 1 < len(calls) else float("inf")
        mine = [e for e in gpu if call["ts"] <= e["ts"] < end]
        if not mine:
            continue
        first = mine[0]["ts"]
        last = max(e["ts"] + e["dur"] for e in mine)
        out.append((first - call["ts"], last - call["ts"],
                    [(e["name"][:60], e["ts"] - first, e["dur"]) for e in mine]))
    return out


def timeline(cell):
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(*cell)
    prepared = persistent.prepare(config, weights)
    call = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    for _ in range(3):
        call()
    cp.cuda.Device().synchronize()
    calls = _per_call(_traced(call, CALLS))[1:]   # the first traced call warms CUPTI
    plan = persistent._plans(config, training=False)["forward"]
    row = {"cell": list(cell), "calls": calls}
    for prefetch in ((True, False) if persistent._final(plan).in_kernel_projection else (True,)):
        persistent.X_PREFETCH = prefetch   # v24's ablation: a build without the prefetch
        try:
            kernel = kernel_launcher(config, prepared, x, h0, c0, plan)
            row[f"kernel_after_write_us{'' if prefetch else '_no_prefetch'}"] = after_writes(kernel)
        finally:
            persistent.X_PREFETCH = True
    return row


def after_writes(kernel, sizes_mb=(0, 8, 32), repeats=8):
    """Median GPU µs of the forward kernel (CUPTI: the kernel's own duration, no launch overhead)
    when a device write of each size runs just before it."""
    out = {}
    for mb in sizes_mb:
        buf = cp.empty(max(1, mb << 18), cp.float32)
        src = cp.asarray(np.random.default_rng(mb).standard_normal(buf.size, dtype=np.float32))

        def write_then_kernel():
            if mb:
                cp.copyto(buf, src)
            kernel()
        write_then_kernel()
        events = _traced(write_then_kernel, repeats)
        durations = [e["dur"] for e in events
                     if e.get("cat") == "kernel" and e.get("name", "").startswith("persistent_lstm_fwd")]
        out[str(mb)] = float(np.median(durations)) if durations else None
    return out


def markdown(rows):
    lines = []
    for r in rows:
        dtype, hidden, batch = r["cell"]
        spans = [c[1] for c in r["calls"]]
        pre = [c[0] for c in r["calls"]]
        lines.append(f"### {dtype} H={hidden} B={batch} T={STEPS}: span from the call's start "
                     f"{np.median(spans):.1f} µs (host before the first GPU op {np.median(pre):.1f})\n")
        lines.append("| node (median call) | start µs | duration µs |\n|---|---|---|")
        mid = r["calls"][len(r["calls"]) // 2]
        for name, start, dur in mid[2]:
            lines.append(f"| {name} | {start:.1f} | {dur:.1f} |")
        for key, label in (("kernel_after_write_us", ""), ("kernel_after_write_us_no_prefetch", " (X_PREFETCH off)")):
            if key in r:
                lines.append(f"\nkernel alone (GPU) after a write of N MB{label} (µs): " +
                             ", ".join(f"{k} MB {v:.1f}" for k, v in r[key].items()) + "\n")
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for cell in CELLS:
        t0 = time.time()
        rows.append(timeline(cell))
        print(cell, f"{time.time() - t0:.1f} s", flush=True)
    (out / "probe_graph_timeline.json").write_text(json.dumps({"meta": bench_meta(), "rows": rows}, indent=1))
    text = markdown(rows)
    (out / "probe_graph_timeline.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
