"""v51 probe: the engines' 16-bit GEMMs (GPU time: calls back to back) by cublasGemmEx against cuBLASLt (its first heuristic, and the fastest of
its first candidates timed once), alternated in one process.

The shapes: the fp32 split input projection (fp16 operands [T B, 3K] x [3K, 4H], fp32 out) at H=1024 for B = 1-32
and at H=512 / 256; the 16-bit input projection where it is not in the kernel ([T B, K] x [K, 4H]); a backward
weight-gradient shape ([4H, T B] x [T B, H]). T = 256. Operands random (never zeros).

    python benchmarks/probe_lt_gemms_v51.py OUT_DIR [--rounds N]
Writes OUT_DIR/probe_lt_gemms_v51.{json,md}.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, bench_meta  # noqa: E402

# (label, M, K, N): row-major out[M, N] = a[M, K] @ b_t[N, K]^T
SHAPES = ([(f"fp32 split projection H=1024 B={b}", STEPS * b, 3072, 4096) for b in (1, 2, 4, 8, 16, 32)]
          + [("fp32 split projection H=512 B=4", STEPS * 4, 1536, 2048),
             ("fp32 split projection H=512 B=8", STEPS * 8, 1536, 2048),
             ("fp32 split projection H=256 B=1", STEPS, 768, 1024)]
          + [(f"16-bit projection H=1024 B={b}", STEPS * b, 1024, 4096) for b in (32, 64)]
          + [(f"16-bit dW H=1024 B={b}", 4096, STEPS * b, 1024) for b in (8, 16)])
MODES = {"GemmEx": {"LT_GEMMS": False}, "Lt heuristic": {"LT_GEMMS": True, "ALGO_CHOICE": "heuristic"},
         "Lt timed": {"LT_GEMMS": True, "ALGO_CHOICE": "timed"}}


def _set_mode(flags):
    from ecornn import gpu_blas, gpu_blas_lt
    gpu_blas.LT_GEMMS = flags["LT_GEMMS"]
    gpu_blas_lt.ALGO_CHOICE = flags.get("ALGO_CHOICE", "heuristic")


def _time_us(fn, stream, repeats=10, back_to_back=20):
    """GPU time per call: ``back_to_back`` calls between two events, so the host runs ahead and the span is the
    GPU's (a synchronised single call's span holds the host's ~10-60 us before its launch: call 2's first form)."""
    import cupy as cp
    times = []
    for _ in range(repeats):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        stream.synchronize()
        start.record(stream)
        for _ in range(back_to_back):
            fn()
        stop.record(stream); stop.synchronize()
        times.append(1e3 * cp.cuda.get_elapsed_time(start, stop) / back_to_back)
    return float(np.median(times))


def probe_shape(label, m, k, n, rounds):
    import cupy as cp
    from ecornn import gpu_blas, gpu_blas_lt
    rng = np.random.default_rng(m + k + n)
    a = cp.asarray(rng.standard_normal((m, k), dtype=np.float32)).astype(cp.float16)
    b_t = cp.asarray(rng.standard_normal((n, k), dtype=np.float32)).astype(cp.float16)
    outs = {mode: cp.empty((m, n), cp.float32) for mode in MODES}
    stream = cp.cuda.get_current_stream()

    def run(mode):
        gpu_blas.matmul_spans(a, b_t.T, outs[mode], [(0, k)], a_type="float16", stream=stream)

    for mode, flags in MODES.items():   # warm (and the timed choice made once)
        _set_mode(flags)
        for _ in range(3):
            run(mode)
    times = {mode: [] for mode in MODES}
    for _ in range(rounds):
        for mode, flags in MODES.items():
            _set_mode(flags)
            times[mode].append(_time_us(lambda: run(mode), stream))
    torch_us = _torch_us(a, b_t, stream, rounds)
    ref = outs["GemmEx"]
    scale = float(cp.abs(ref).max())
    row = dict(label=label, m=m, k=k, n=n, us={mode: float(np.median(t)) for mode, t in times.items()},
               rounds={mode: t for mode, t in times.items()},
               max_abs_diff_over_max={mode: float(cp.abs(outs[mode] - ref).max()) / scale for mode in MODES},
               timed_choice=[v for key, v in gpu_blas_lt.choices.items() if key[3:6] == (n, m, k)
                             and key[-1] == "timed"])
    row["torch_us"] = torch_us
    row["tflops"] = {mode: 2.0 * m * n * k / us / 1e6 for mode, us in row["us"].items()}
    _set_mode(MODES["GemmEx"])
    print(json.dumps(row), flush=True)
    return row


def _torch_us(a, b_t, stream, rounds) -> dict:
    """torch's fp16 GEMM of the same operands (fp16 out; fp32 out where torch offers out_dtype), us per call."""
    import torch
    a_t, bt_t = torch.from_dlpack(a), torch.from_dlpack(b_t)
    fns = {"fp16 out": lambda: torch.mm(a_t, bt_t.T)}
    try:
        torch.mm(a_t, bt_t.T, out_dtype=torch.float32)
        fns["fp32 out"] = lambda: torch.mm(a_t, bt_t.T, out_dtype=torch.float32)
    except Exception:  # noqa: BLE001 - this torch has no out_dtype
        pass
    torch.cuda.synchronize()
    return {name: _time_us(fn, stream, repeats=max(rounds, 5)) for name, fn in fns.items()}


def markdown(rows, meta) -> str:
    device = meta.get("device", {})
    name = device.get("name", "?") if isinstance(device, dict) else device
    modes = list(MODES)
    lines = [f"# v51 probe: 16-bit GEMMs by cublasGemmEx and cuBLASLt ({name})", "",
             "| shape | M | K | N | " + " | ".join(f"{m} us" for m in modes) + " | Lt heuristic / GemmEx | "
             "Lt timed / GemmEx | timed pick | torch fp16 out | torch fp32 out |",
             "|---|---|---|---|" + "---|" * (len(modes) + 5)]
    for r in rows:
        us = r["us"]
        pick = r["timed_choice"][0][0] if r["timed_choice"] else "-"
        lines.append(f"| {r['label']} | {r['m']} | {r['k']} | {r['n']} | "
                     + " | ".join(f"{us[m]:.1f}" for m in modes)
                     + f" | {us['Lt heuristic'] / us['GemmEx']:.3f} | {us['Lt timed'] / us['GemmEx']:.3f} | {pick} | "
                     + " | ".join(f"{r['torch_us'].get(k, float('nan')):.1f}" for k in ("fp16 out", "fp32 out")) + " |")
    return "\n".join(lines) + "\n\nMedians over rounds (each the median of 10 synchronised calls), modes alternated.\n"


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    rows = [probe_shape(*shape, args.rounds) for shape in SHAPES]
    (out / "probe_lt_gemms_v51.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    table = markdown(rows, meta)
    (out / "probe_lt_gemms_v51.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
