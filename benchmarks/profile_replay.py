"""Where a replayed inference forward spends the time before its graph runs (v17, v20, v21; H100, T=256).

The benches time a call between CUDA events recorded on the caller's stream before and after it,
with a sync after each call, so the host's work up to the graph launch is GPU idle time inside the
measured span, and so is every node of the graph besides the kernel. Per cell and mode (v21: as v20,
and a tensor-core kernel that projects x itself reads it at the fetched address, no copy,
persistent_graph.KERNEL_READS_X; v20: the graph fetches its inputs through the replay ring,
persistent_graph.INPUTS_BY_REFERENCE; v17: the caller's inputs copied by a kernel launched before
the graph; all with v17's replay on the caller's stream, 16-bit x without an fp32 round trip and the
outputs in one buffer; results/persistent_v17 holds v16 and v17_memcpys; v17 is left out of MODES
now, V17 is kept), timed alternately (A B B A):
  span            the bench's number (events around persistent.forward, synced per call)
  api span        the same through ecornn.lstm_forward on prepared weights
  graph GPU       the mode's graph replayed back to back (its nodes without any host gap)
  pre-launch      host µs from the call's entry to the graph launch (a proxy around graph.launch)
  launch          host µs inside graph.launch; post: after it, to the call's return
and the kernel alone back to back. Random non-zero inputs; medians.

    python benchmarks/profile_replay.py OUT_DIR [--repeats N] [--rows N]
Writes OUT_DIR/profile_replay.{json,md}.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import (STEPS, _problem, bench_args, bench_meta, fmt, kernel_launcher,  # noqa: E402
                              measure_rows)
from profile_whole_call import _gpu_us as _back_to_back_us  # noqa: E402  (GPU µs per call, back to back)

from ecornn.engines import persistent as _engine  # noqa: E402

ROWS = [("bfloat16", 1024, 4), ("float16", 1024, 4), ("float32", 512, 4), ("float16", 1024, 8),
        ("float32", 1024, 4), ("float16", 1024, 16), ("bfloat16", 2048, 4), ("float16", 1024, 1)]
V17 = {"REPLAY_ON_CALLER_STREAM": True, "COPY_KERNEL": True, "DIRECT_16BIT_INPUT": True, "ONE_OUTPUT_BUFFER": True,
       "INPUTS_BY_REFERENCE": False}
V20 = {**V17, "INPUTS_BY_REFERENCE": True, "KERNEL_READS_X": False}
V21 = {**V20, "KERNEL_READS_X": True}
GRAPH_FLAGS = ("REPLAY_ON_CALLER_STREAM", "COPY_KERNEL", "INPUTS_BY_REFERENCE",   # persistent_graph's; the
               "KERNEL_READS_X")                                                  # others are persistent's
MODES = {"v21": V21, "v20": V20}   # (v16 and v17_memcpys: results/persistent_v17; v17: results/persistent_v20)
DEFAULTS = {**V21, "MIN_3XTF32_FLOPS": _engine.MIN_3XTF32_FLOPS}   # the engine's default, read at import


class _TimedGraph:
    """Stands in for a captured graph: records the host clock around each launch."""

    def __init__(self, graph):
        self.graph, self.before, self.after = graph, 0.0, 0.0

    def launch(self, stream=None):
        self.before = time.perf_counter()
        self.graph.launch(stream=stream)
        self.after = time.perf_counter()


def _set_mode(flags: dict) -> None:
    from ecornn.engines import persistent, persistent_graph
    for name, value in {**DEFAULTS, **flags}.items():
        setattr(persistent_graph if name in GRAPH_FLAGS else persistent, name, value)


def _span_us(fn, repeats):
    """Median µs between events recorded on the current stream around ``fn()``, synced per call."""
    import cupy as cp
    from ecornn.timing import median_seconds
    return median_seconds(fn, repeats, xp=cp, warmup=0) * 1e6


def _host_split_us(fn, timed, repeats):
    """Median host µs (pre-launch, in the launch, after it) of ``fn()``, synced between calls."""
    import cupy as cp
    parts = []
    for _ in range(repeats):
        cp.cuda.get_current_stream().synchronize()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        parts.append((timed.before - t0, timed.after - timed.before, t1 - timed.after))
    return [float(np.median([p[i] for p in parts])) * 1e6 for i in range(3)]


def profile(dtype, hidden, batch, repeats):
    import cupy as cp
    from ecornn import lstm_forward, prepare_weights
    from ecornn.engines import persistent, persistent_graph
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    prepared = persistent.prepare(config, weights)
    api_prepared = prepare_weights(weights, strategy="persistent")
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    api = lambda: lstm_forward(x, api_prepared, h0, c0, strategy="persistent")  # noqa: E731
    modes = list(MODES)
    timed = {}
    stream = cp.cuda.get_current_stream()
    out = {}
    try:
        for mode in modes:   # each mode's graph (modes that differ only in the replay share one)
            _set_mode(MODES[mode])
            fwd(), fwd(), api(), api()
            entry = prepared.graphs[persistent_graph._key(config, persistent._graph_mode("auto"), x, h0, c0)]
            if not isinstance(entry.graph, _TimedGraph):
                entry.graph = _TimedGraph(entry.graph)
            timed[mode] = entry
            out[f"{mode}_kind"] = persistent.last_kinds.get("forward")
        samples = {m: {"span": [], "api_span": [], "split": []} for m in modes}
        for rnd in range(2):                                 # A B C, then C B A
            for mode in (modes if rnd == 0 else modes[::-1]):
                _set_mode(MODES[mode])
                fwd(), api()
                samples[mode]["span"].append(_span_us(fwd, repeats))
                samples[mode]["api_span"].append(_span_us(api, repeats))
                samples[mode]["split"].append(_host_split_us(fwd, timed[mode].graph, repeats))
        for mode in modes:
            entry = timed[mode]
            out[f"{mode}_graph_gpu_us"] = _back_to_back_us(lambda: entry.launch_bare(stream), repeats)
    finally:
        _set_mode({})
    for mode, s in samples.items():
        out[f"{mode}_span_us"] = s["span"]
        out[f"{mode}_api_span_us"] = s["api_span"]
        for i, part in enumerate(("pre_launch", "launch", "post")):
            out[f"{mode}_{part}_us"] = float(np.mean([sp[i] for sp in s["split"]]))
    plan = persistent.plans_for(config, False)["forward"]
    kernel = kernel_launcher(config, prepared, x, h0, c0, plan)
    out["kernel_gpu_us"] = _back_to_back_us(kernel, repeats)
    return out


def profile_row(dtype, hidden, batch, repeats) -> dict:
    row = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": STEPS}
    try:
        row.update(profile(dtype, hidden, batch, repeats))
    except Exception as exc:  # recorded, never hidden
        row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    print(json.dumps(row), flush=True)
    return row


def markdown(rows):
    per_mode = [("span_us", "span"), ("api_span_us", "api span"), ("graph_gpu_us", "graph GPU"),
                ("pre_launch_us", "pre-launch host"), ("launch_us", "launch host"), ("post_us", "post host")]
    head = [f"{label} {m}" for key, label in per_mode for m in MODES] + ["kernel GPU"]
    lines = ["| dtype | H | B | kind | " + " | ".join(h + " µs" for h in head) + " | span µs/step " + " / ".join(MODES)
             + " |", "|" + "---|" * (len(head) + 5)]

    def cell(v):
        return " / ".join(fmt(x, ".1f") for x in v) if isinstance(v, list) else fmt(v, ".1f")
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | error: {r['error'][:200]} |")
            continue
        vals = [cell(r.get(f"{m}_{key}")) for key, _ in per_mode for m in MODES] + [cell(r.get("kernel_gpu_us"))]
        steps = " / ".join(fmt(float(np.mean(r[f"{m}_span_us"])) / STEPS if f"{m}_span_us" in r else None)
                           for m in MODES)
        lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | {r.get(f'{next(iter(MODES))}_kind', '-')} | " + " | ".join(vals)
                     + f" | {steps} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    def configure(parser):
        parser.add_argument("--rows", type=int, default=len(ROWS))
    args, out = bench_args(argv, repeats=30, configure=configure)
    measure_rows(out, "profile_replay", bench_meta(), ROWS[:args.rows],
                 lambda dtype, hidden, batch: profile_row(dtype, hidden, batch, args.repeats), markdown)


if __name__ == "__main__":
    main()
