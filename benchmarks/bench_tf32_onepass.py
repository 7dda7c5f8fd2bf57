"""v25 probe: the fp32 input projection x W_ih^T three ways, on the GPU, alternated in one process.

- strict: cuBLAS SGEMM (what runs below persistent.MIN_3XTF32_FLOPS);
- 3xtf32: gpu_blas.matmul_3xtf32, three TF32 GEMMs with beta accumulation (x split each call, the
  weight parts prepared), what runs above it;
- onepass: gpu_blas.tf32_split3 of x (one kernel, kernels/tf32_split.cu) + one TF32 GEMM over
  K' = 3K against the prepared split of W_ih^T (gpu_blas.matmul_3xtf32_onepass); "GEMM alone" with
  x's split made before.
Shapes are the projections of T=256 layers with input = hidden: rows T*B, K = H, N = 4H.
Prints and saves (--out DIR) µs per projection (median of rounds) and the error vs float64.

    python benchmarks/bench_tf32_onepass.py --out $OUT/tf32
"""
import argparse
import json
import os
import sys
from pathlib import Path

import cupy as cp
import numpy as np

from ecornn import gpu_blas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profile_whole_call import _gpu_us  # noqa: E402 - GPU µs per call, back to back

CELLS = [(512, 4), (512, 8), (1024, 4), (1024, 8), (1536, 4), (768, 4), (512, 16)]   # (H, B), T = 256


def run_cell(hidden, batch, steps=256, rounds=15):
    rng = np.random.default_rng(hidden * 100 + batch)
    rows = steps * batch
    x = cp.asarray(rng.standard_normal((rows, hidden)).astype(np.float32))
    w = cp.asarray((rng.standard_normal((4 * hidden, hidden)) / np.sqrt(hidden)).astype(np.float32))
    out = cp.empty((rows, 4 * hidden), cp.float32)
    w_parts = tuple(p.T for p in gpu_blas.tf32_parts(w))
    w3 = gpu_blas.tf32_split3(w.T, 0, False)
    x3 = gpu_blas.tf32_split3(x, 1, True)
    modes = {
        "strict": lambda: gpu_blas.matmul(x, w.T, out),
        "3xtf32": lambda: gpu_blas.matmul_3xtf32(x, w.T, out, b_parts=w_parts),
        "onepass": lambda: gpu_blas.matmul_3xtf32_onepass(x, w.T, out, b3=w3),
        "onepass_gemm_only": lambda: gpu_blas.matmul_3xtf32_onepass(x, w.T, out, a3=x3, b3=w3),
        "split_only": lambda: gpu_blas.tf32_split3(x, 1, True),
    }
    want = cp.asnumpy(x).astype(np.float64) @ cp.asnumpy(w).astype(np.float64).T
    errors = {}
    for name, fn in modes.items():
        out.fill(np.nan)
        fn()
        cp.cuda.Device().synchronize()
        if name != "split_only":
            errors[name] = float(np.linalg.norm(cp.asnumpy(out) - want) / np.linalg.norm(want))
    times = {name: [] for name in modes}
    for _ in range(rounds):
        for name, fn in modes.items():
            times[name].append(_gpu_us(fn, 20))
    return {"H": hidden, "B": batch, "rows": rows, "gflop": 2.0 * rows * hidden * 4 * hidden / 1e9,
            "us": {n: float(np.median(v)) for n, v in times.items()}, "rel_err": errors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    results = {"device": name, "cupy": cp.__version__, "cells": [run_cell(h, b) for h, b in CELLS]}
    lines = [f"device: {name}", "| H | B | GFLOP | strict µs | 3xtf32 µs | onepass µs (GEMM alone, split alone) | err strict / 3x / 1p |",
             "|---|---|---|---|---|---|---|"]
    for c in results["cells"]:
        u, e = c["us"], c["rel_err"]
        lines.append(f"| {c['H']} | {c['B']} | {c['gflop']:.1f} | {u['strict']:.1f} | {u['3xtf32']:.1f} | "
                     f"{u['onepass']:.1f} ({u['onepass_gemm_only']:.1f}, {u['split_only']:.1f}) | "
                     f"{e['strict']:.1e} / {e['3xtf32']:.1e} / {e['onepass']:.1e} |")
    print("\n".join(lines))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "tf32_onepass.json"), "w") as f:
            json.dump(results, f, indent=1)
        with open(os.path.join(args.out, "tf32_onepass.md"), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
