"""v35: the fp16-split GEMM's unscale pass alone, by CUDA events: v28's flat pass (one element per thread, a
64-bit index division each) against unscale_rows_cols4 (four columns per thread), on fp32 xw of the
forwards' shapes (T B rows, 4H columns; random values, exponents in -8..8), both after the GEMM that writes
xw (as in the forward: xw in L2 where it fits) and alone (xw already read back).

    python benchmarks/time_unscale_v35.py OUT_DIR
Writes OUT_DIR/time_unscale_v35.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import bench_args, bench_meta, save_rows  # noqa: E402

SHAPES = [(1024, 4096), (2048, 4096), (1024, 6144), (4096, 4096), (256, 4096)]   # (T B, 4H), T=256


def _events_us(setup, fn, repeats: int) -> float:
    """Median µs of ``fn`` by CUDA events, ``setup()`` (untimed) before each."""
    import cupy as cp
    times = []
    for _ in range(repeats):
        setup()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
    return float(np.median(times))


def time_shape(rows: int, n: int, repeats: int) -> dict:
    import cupy as cp
    from ecornn import gpu_blas
    rng = np.random.default_rng(rows + n)
    values = cp.asarray(rng.standard_normal((rows, n)).astype(np.float32))
    out = cp.empty_like(values)
    row_exp = cp.asarray(rng.integers(-8, 8, rows).astype(np.int32))
    col_exp = cp.asarray(rng.integers(-8, 8, n).astype(np.int32))
    flush = cp.empty(128 << 20, cp.uint8)

    def warm():   # fresh values, just written (in L2 where they fit, as after the GEMM)
        out[...] = values

    def cold():   # fresh values, then 128 MB written over L2
        out[...] = values
        flush.fill(1)
    row = {"rows": rows, "n": n, "mb": rows * n * 4 / 2 ** 20}
    for name, by_fours in (("flat", False), ("fours", True)):
        gpu_blas.UNSCALE_BY_FOURS = by_fours
        unscale = lambda: gpu_blas.unscale_rows_cols(out, row_exp, col_exp)  # noqa: E731
        warm()
        unscale()
        row[f"{name}_l2_us"] = _events_us(warm, unscale, repeats)
        row[f"{name}_cold_us"] = _events_us(cold, unscale, repeats)
    gpu_blas.UNSCALE_BY_FOURS = True
    return row


def markdown(rows) -> str:
    lines = ["| T B rows | 4H | MB | flat, warm (µs) | by fours, warm | flat, from HBM | by fours, from HBM |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['rows']} | {r['n']} | {r['mb']:.0f} | {r['flat_l2_us']:.1f} | {r['fours_l2_us']:.1f} | "
                     f"{r['flat_cold_us']:.1f} | {r['fours_cold_us']:.1f} |")
    return "\n".join(lines)


def main(argv=None):
    args, out = bench_args(argv, repeats=50)
    rows = []
    for shape in SHAPES:
        rows.append(time_shape(*shape, args.repeats))
        save_rows(out, "time_unscale_v35", bench_meta(), rows, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
