"""Host µs of each step of a replayed inference forward up to its graph launch (v17), and of the
CuPy / CUDA calls they are made of, each timed alone in a loop (the GPU is never waited for).

    python benchmarks/profile_replay_host.py OUT_DIR [--repeats N]
Writes OUT_DIR/profile_replay_host.{json,md}.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _problem, bench_args, bench_meta, save_rows  # noqa: E402

CELL = ("bfloat16", 1024, 4)


def _loop_us(fn, repeats):
    """Median host µs of ``fn()`` over ``repeats`` calls (in batches of 10, the GPU drained between)."""
    import cupy as cp
    fn()
    times = []
    for _ in range(max(1, repeats // 10)):
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            fn()
        times.append((time.perf_counter() - t0) / 10)
    return float(np.median(times)) * 1e6


def _steps_us(config, x, h0, c0, prepared, repeats):
    """Median host µs of each step of persistent.forward's replay path, run by hand in its order."""
    import cupy as cp
    from ecornn.engines import persistent, persistent_graph as pg
    names = ["graph_mode", "key", "lookup", "current_stream", "order", "hand_inputs", "launch", "copies_out", "mark"]
    samples = {n: [] for n in names}
    for _ in range(repeats):
        cp.cuda.Device().synchronize()
        t = [time.perf_counter()]
        mode = persistent._graph_mode("auto")
        t.append(time.perf_counter())
        key = pg._key(config, mode, x, h0, c0)
        t.append(time.perf_counter())
        entry = prepared.graphs[key]
        t.append(time.perf_counter())
        caller = cp.cuda.get_current_stream()
        t.append(time.perf_counter())
        pg._after_last_replay(caller)
        t.append(time.perf_counter())
        kept = pg._hand_inputs(entry.inputs, (x, h0, c0), caller, entry.ring)
        t.append(time.perf_counter())
        entry.graph.launch(stream=caller)
        pg._count_launch(entry.ring)
        del kept
        t.append(time.perf_counter())
        pg._copies_out(entry.outputs, x.dtype, caller)
        t.append(time.perf_counter())
        pg._mark_replay(caller)
        t.append(time.perf_counter())
        for name, a, b in zip(names, t, t[1:]):
            samples[name].append((b - a) * 1e6)
    return {f"step_{n}_us": float(np.median(v)) for n, v in samples.items()}


def _ring_launch(pg, entry, inputs, stream):
    """v20's whole host side of a launch: the slot, the graph launch, the count (the copy kernel's
    graph: the copy kernel and the launch)."""
    with pg._LOCK:
        kept = pg._hand_inputs(entry.inputs, inputs, stream, entry.ring)
        entry.graph.launch(stream=stream)
        pg._count_launch(entry.ring)
        del kept
        pg._mark_replay(stream)


def main(argv=None):
    import cupy as cp
    from ecornn.engines import persistent, persistent_graph as pg
    args, out = bench_args(argv, repeats=200)
    meta = bench_meta()
    config, weights, x, h0, c0 = _problem(*CELL)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    fwd(), fwd(), fwd()
    cp.cuda.Device().synchronize()
    row = {"dtype": CELL[0], "hidden": CELL[1], "batch": CELL[2]}
    row.update(_steps_us(config, x, h0, c0, prepared, args.repeats))
    entry = next(iter(prepared.graphs.values()))
    stream = cp.cuda.get_current_stream()
    dst = entry.inputs[1]
    event = cp.cuda.Event(disable_timing=True)
    inputs = (x, h0, c0)
    kernel = pg._copy_kernel(cp.cuda.runtime.getDevice())
    words = [np.int64(a.nbytes) for a in entry.inputs]
    calls = {
        "forward_call": fwd,
        "copy_inputs_kernel": lambda: pg._copy_inputs(entry.inputs, inputs, stream),
        "ring_publish_graph_launch": lambda: _ring_launch(pg, entry, inputs, stream),
        "copy_inputs_memcpys": lambda: [pg._copy_in(d, s, stream) for d, s in zip(entry.inputs, inputs)],
        "copyable_by_kernel": lambda: pg._copyable_by_kernel(entry.inputs, inputs),
        "raw_kernel_launch": lambda: kernel((256,), (256,), (entry.inputs[0], x, words[0], entry.inputs[1], h0,
                                                              words[1], entry.inputs[2], c0, words[2])),
        "raw_kernel_launch_ptrs": lambda: kernel((256,), (256,), (
            np.uint64(entry.inputs[0].data.ptr), np.uint64(x.data.ptr), words[0], np.uint64(entry.inputs[1].data.ptr),
            np.uint64(h0.data.ptr), words[1], np.uint64(entry.inputs[2].data.ptr), np.uint64(c0.data.ptr), words[2])),
        "memcpyAsync": lambda: cp.cuda.runtime.memcpyAsync(dst.data.ptr, h0.data.ptr, dst.nbytes,
                                                           cp.cuda.runtime.memcpyDeviceToDevice, stream.ptr),
        "flags_c_contiguous": lambda: h0.flags.c_contiguous,
        "data_ptr": lambda: h0.data.ptr,
        "dtype_eq": lambda: h0.dtype == dst.dtype,
        "Device_id": lambda: cp.cuda.Device().id,
        "runtime_getDevice": lambda: cp.cuda.runtime.getDevice(),
        "get_current_stream": cp.cuda.get_current_stream,
        "event_record": lambda: event.record(stream),
        "new_event_record": lambda: stream.record(),
        "empty_small": lambda: cp.empty(4096, cp.float32),
        "config_key": config.key,
        "graph_launch_bare": lambda: entry.launch_bare(stream),
    }
    for name, fn in calls.items():
        row[f"call_{name}_us"] = _loop_us(fn, args.repeats)
    cp.cuda.Device().synchronize()
    lines = ["| what | host µs |", "|---|---|"] + [f"| {k} | {v:.2f} |" for k, v in row.items()
                                                    if isinstance(v, float)]
    table = "\n".join(lines)
    print(table)
    save_rows(out, "profile_replay_host", meta, [row], table)


if __name__ == "__main__":
    main()
