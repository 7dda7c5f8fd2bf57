"""v50: the functional API's host time on prepared weights, piece by piece. lstm_forward's steps (v50's) restated with a
perf_counter stamp between them (the same calls, in its order), each call after a device sync as the benches make
it; medians of the pieces in µs. Also the hashes the planner's cache computes per call.

    python benchmarks/diag_api_pieces_v50.py OUT_DIR
Writes OUT_DIR/diag_api_pieces_v50.json and prints the table.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import _problem, bench_meta  # noqa: E402

CELLS = [("float32", 1024, 8), ("bfloat16", 1024, 4)]
PIECES = ("prepared_call", "check_states", "to_modules", "engine_forward", "outputs")
V49_PIECES = ("call_config", "check_states", "plan", "get_engine", "to_modules", "engine_forward", "outputs")
# call 5 (v49's API, this script's first form): 11.4 µs before the engine at fp32 H=1024 B=8 — call_config 1.61,
# check_states 2.06, plan 3.65, get_engine 2.6, to_modules 1.36 (results/persistent_v50/5_diag_api_pieces_v50.json)


def stamped_call(x, prepared, h0, c0) -> list:
    """lstm_forward(x, prepared, h0, c0)'s steps (inference, TNC) with the time after each (v50's API)."""
    from ecornn import api
    from ecornn.arrays import cupy_or_none, module_of, to_module
    stamps = [time.perf_counter()]
    config, chosen, engine, state_shape = api._prepared_call(prepared, x, "TNC", False)
    stamps.append(time.perf_counter())
    for name, state in (("h0", h0), ("c0", c0)):
        api._check_array(name, state, state_shape, config.dtype)
    stamps.append(time.perf_counter())
    caller = module_of(x)
    xp = cupy_or_none()
    x_e, h0_e, c0_e = to_module(x, xp), to_module(h0, xp), to_module(c0, xp)
    stamps.append(time.perf_counter())
    y, h, c, _ = engine.forward(config, x_e, prepared.raw, h0_e, c0_e, training=False, dropout=0.0, rng=None,
                                prepared=prepared.data)
    stamps.append(time.perf_counter())
    dtype = x.dtype
    api.LSTMOutput(to_module(y, caller).astype(dtype, copy=False), to_module(h, caller).astype(dtype, copy=False),
                   to_module(c, caller).astype(dtype, copy=False), None, chosen.strategy, chosen.reason)
    stamps.append(time.perf_counter())
    return np.diff(stamps) * 1e6


def hashes(config, device) -> dict:
    out = {}
    for name, value in (("hash(config)", config), ("hash(device)", device)):
        start = time.perf_counter()
        for _ in range(1000):
            hash(value)
        out[name] = (time.perf_counter() - start) * 1e3
    return out


def main(argv=None) -> int:
    import cupy as cp
    from ecornn import lstm_forward, prepare_weights
    from ecornn.devices import current
    out = Path((argv or sys.argv[1:])[0])
    out.mkdir(parents=True, exist_ok=True)
    result = {"meta": bench_meta(), "rows": []}
    for cell in CELLS:
        config, weights, x, h0, c0 = _problem(*cell)
        prepared = prepare_weights(weights, strategy="persistent")
        for _ in range(3):
            lstm_forward(x, prepared, h0, c0)
        samples = []
        for _ in range(300):
            cp.cuda.Device().synchronize()
            samples.append(stamped_call(x, prepared, h0, c0))
        cp.cuda.Device().synchronize()
        medians = dict(zip(PIECES, np.median(samples, axis=0).round(2).tolist()))
        row = {"cell": cell, "after_sync_us": medians, **hashes(config, current())}
        result["rows"].append(row)
        print(json.dumps(row), flush=True)
    (out / "diag_api_pieces_v50.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
