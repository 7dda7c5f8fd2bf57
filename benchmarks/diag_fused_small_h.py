"""Diagnosis: the fused fp32 strategy at small H (the v27 sweep: H=128 B=8/16 28.5 µs/step against
5.5 at H=256 B=8). Whole calls (ecornn.run.time_config) per (H, B) under the default options, without
the CUDA graph, without the second stream, and with TF32 GEMMs; then, with --ncu-cell, one short
eager forward of one cell for Nsight Compute's per-kernel summary.

    python benchmarks/diag_fused_small_h.py [--iterations N]
    ncu --print-summary per-kernel python benchmarks/diag_fused_small_h.py --ncu-cell 128x8
"""
import argparse

import numpy as np

from ecornn import LSTMConfig
from ecornn.engines import fused
from ecornn.run import time_config

CELLS = [(128, 4), (128, 8), (128, 16), (192, 8), (256, 8), (256, 16)]
VARIANTS = {"default": {}, "no_graph": {"graph": False}, "one_stream": {"second_stream": False, "wavefront": False},
            "tf32": {"tf32": True}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--ncu-cell", help="HxB: one eager forward of T=16 steps for ncu")
    args = parser.parse_args()
    import cupy as cp
    if args.ncu_cell:
        hidden, batch = map(int, args.ncu_cell.split("x"))
        config = LSTMConfig(hidden, hidden, batch=batch, seq_len=16, dtype="float32")
        with fused.using(graph=False):
            time_config(config, "fused", 2, False, xp=cp, progress=False)
        return
    print("| H | B | " + " | ".join(VARIANTS) + " |")
    for hidden, batch in CELLS:
        config = LSTMConfig(hidden, hidden, batch=batch, seq_len=256, dtype="float32")
        us = []
        for changes in VARIANTS.values():
            with fused.using(**changes):
                us.append(np.median([time_config(config, "fused", args.iterations, False, xp=cp, progress=False)
                                     ["us_per_step"] for _ in range(2)]))
        print(f"| {hidden} | {batch} | " + " | ".join(f"{u:.2f}" for u in us) + " |", flush=True)


if __name__ == "__main__":
    main()
