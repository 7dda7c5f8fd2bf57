"""v50: what the functional API adds to a persistent forward. The engine called directly (as bench_persistent
times it) against `lstm_forward` on prepared weights and on raw weights, alternated in one process; per round the
whole forward (CUDA events, synchronised calls) and the host time of the call alone (perf_counter around the call,
after a device sync, the GPU work left to run outside the span).

    python benchmarks/diag_api_overhead_v50.py OUT_DIR [--rounds N]
Writes OUT_DIR/diag_api_overhead_v50.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, bench_meta  # noqa: E402

CELLS = [("float32", 1024, 4), ("float32", 1024, 8), ("bfloat16", 1024, 4), ("float16", 1024, 16)]
MODES = ("engine", "api_prepared", "api_raw")


def callers(cell) -> dict:
    from ecornn import lstm_forward, prepare_weights
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(*cell)
    prepared = prepare_weights(weights, strategy="persistent")
    return {"engine": lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared.data),
            "api_prepared": lambda: lstm_forward(x, prepared, h0, c0),
            "api_raw": lambda: lstm_forward(x, weights, h0, c0)}


def host_us(fn, repeats=50) -> float:
    """Median host time of one call after a device sync (its GPU work runs on after the span)."""
    import cupy as cp
    times = []
    for _ in range(repeats):
        cp.cuda.Device().synchronize()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    cp.cuda.Device().synchronize()
    return float(np.median(times)) * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    meta, rows = bench_meta(), []
    lines = ["| cell | " + " | ".join(f"{m} fwd µs/step" for m in MODES) + " | "
             + " | ".join(f"{m} host µs" for m in MODES) + " |", "|---|" + "---|" * (2 * len(MODES))]
    for cell in CELLS:
        fns = callers(cell)
        for fn in fns.values():   # builds and graphs first, outside the rounds
            fn(), fn()
        fwd, host = {m: [] for m in MODES}, {m: [] for m in MODES}
        for _ in range(args.rounds):
            for m in MODES:
                fwd[m].append(_median_ms(fns[m], 20) * 1e3 / STEPS)
                host[m].append(host_us(fns[m]))
        rows.append({"dtype": cell[0], "hidden": cell[1], "batch": cell[2], "fwd_us": fwd, "host_us": host})
        lines.append(f"| {cell[0]} H={cell[1]} B={cell[2]} | "
                     + " | ".join(f"{np.median(fwd[m]):.3f}" for m in MODES) + " | "
                     + " | ".join(f"{np.median(host[m]):.1f}" for m in MODES) + " |")
        print(lines[-1], flush=True)
        (args.out / "diag_api_overhead_v50.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1,
                                                                        default=str))
    (args.out / "diag_api_overhead_v50.md").write_text(f"{json.dumps(meta, default=str)}\n\n" + "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
