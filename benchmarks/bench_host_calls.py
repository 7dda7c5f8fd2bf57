"""Inference calls through the functional API (ecornn.lstm_forward on prepared weights, replayed from
CUDA graphs) timed from the host, with the output casts captured in the graph or left to each replay
(persistent_graph.CAPTURE_OUTPUT_CASTS, the ablation). Per cell and mode: µs per call with a sync
after each (as the runner and the sweep time them), and pipelined (N calls, then one sync): the
host's issue time per call and the wall time per call. Random non-zero inputs, medians.

    python benchmarks/bench_host_calls.py OUT_DIR [--repeats N] [--pipelined N]
Writes OUT_DIR/host_calls.{json,md}.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _problem, ab_table, bench_meta, fmt, save_rows  # noqa: E402

CELLS = [("float16", 1024, 1, 256), ("bfloat16", 1024, 1, 256), ("float16", 1024, 1, 32), ("float32", 512, 1, 256)]
MODES = {"captured": True, "per_replay": False}


def measure(dtype, hidden, batch, steps, captured, repeats, pipelined) -> dict:
    import cupy as cp
    from ecornn import lstm_forward, prepare_weights
    from ecornn.engines import persistent_graph
    persistent_graph.CAPTURE_OUTPUT_CASTS = captured
    try:
        config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
        x = x[:steps]
        prepared = prepare_weights(weights, strategy="persistent")   # fresh: this mode's graph
        sync = cp.cuda.get_current_stream().synchronize

        def call():
            return lstm_forward(x, prepared, h0, c0, strategy="persistent")
        for _ in range(3):
            call()
        sync()
        per_call = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            call()
            sync()
            per_call.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(pipelined):
            call()
        issued = time.perf_counter()
        sync()
        done = time.perf_counter()
        return {"sync_call_us": float(np.median(per_call)) * 1e6, "issue_us": (issued - t0) / pipelined * 1e6,
                "pipelined_call_us": (done - t0) / pipelined * 1e6}
    finally:
        persistent_graph.CAPTURE_OUTPUT_CASTS = True


def markdown(rows):
    head = ("| dtype | H | B | T | sync µs/call captured | per replay | issue µs/call captured | per replay | "
            "pipelined µs/call captured | per replay |")

    def cells(r):
        return [fmt(r.get(f"{m}_{k}"), ".1f") for k in ("sync_call_us", "issue_us", "pipelined_call_us") for m in MODES]
    return ab_table(rows, head, cells, lead=("dtype", "hidden", "batch", "steps"))


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--pipelined", type=int, default=50)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for dtype, hidden, batch, steps in CELLS:
        row = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": steps}
        try:
            for mode, captured in MODES.items():
                row.update({f"{mode}_{k}": v for k, v in
                            measure(dtype, hidden, batch, steps, captured, args.repeats, args.pipelined).items()})
        except Exception as exc:  # noqa: BLE001 - recorded in the table
            row["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        rows.append(row)
    table = markdown(rows)
    print(table)
    save_rows(out, "host_calls", bench_meta(), rows, table)


if __name__ == "__main__":
    main()
