"""v46 diagnostic: where a replayed inference forward spends host time before the GPU starts. Per cell: the event
span of one call as the benches time it (GPU idle before the call), the GPU's own time of the replayed graph
(ForwardGraph.launch_bare, bracketed the same way: its host part is one launch), the host time of a whole call
(perf_counter) and cProfile's top functions over 30 calls (the GPU synchronised outside the profiled calls).

    python benchmarks/profile_host_v46.py OUT_DIR
Writes OUT_DIR/profile_host_v46.md.
"""
from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _median_ms, _problem  # noqa: E402

CELLS = [("float32", 1024, 8), ("bfloat16", 1024, 4), ("float16", 1024, 16)]


def profile_cell(dtype, hidden, batch) -> str:
    import cupy as cp
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    span = _median_ms(fwd, 30) * 1e3
    graph = next(iter(prepared.graphs.values()))
    stream = cp.cuda.get_current_stream()
    bare = _median_ms(lambda: graph.launch_bare(stream), 30) * 1e3
    host = []
    for _ in range(30):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        fwd()
        host.append((time.perf_counter() - start) * 1e6)
    profiler = cProfile.Profile()
    for _ in range(30):
        cp.cuda.Device().synchronize()
        profiler.enable()
        fwd()
        profiler.disable()
    cp.cuda.Device().synchronize()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(30)
    return (f"## {dtype} H={hidden} B={batch}\n\nevent span of a call {span:.1f} µs; the bare graph {bare:.1f} µs; "
            f"host time of a call (perf_counter) median {np.median(host):.1f} µs, min {min(host):.1f}\n\n"
            f"```\n{text.getvalue()[:6000]}\n```\n")


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    out.mkdir(parents=True, exist_ok=True)
    parts = []
    for cell in CELLS:
        try:
            parts.append(profile_cell(*cell))
        except Exception as exc:   # one cell's failure must not lose the others
            parts.append(f"## {cell}: {type(exc).__name__}: {exc}\n")
        print(parts[-1][:600], flush=True)
        (out / "profile_host_v46.md").write_text("\n".join(parts))


if __name__ == "__main__":
    main()
