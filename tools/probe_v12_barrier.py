"""v12 probe: why the in-kernel input projection loses on the grid.sync plans. The forward kernel alone
(T=256, 1 layer, input=hidden, random inputs, CUDA events, median), four builds per row:
projection as a GEMM or in the kernel, each with cooperative grid.sync() or the split barrier
(SPLIT_BARRIER=0/1; the engine's defaults are GEMM + grid.sync and in-kernel + split).

    python tools/probe_v12_barrier.py OUT_DIR [--repeats N]
Writes OUT_DIR/probe_v12_barrier.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_persistent import STEPS, _median_ms, _problem, bench_args, bench_meta, fmt, kernel_launcher, measure_rows  # noqa: E402

from ecornn.engines import persistent, persistent_capacity as capacity  # noqa: E402

ROWS = [("float16", 1024, 8, False), ("float16", 1024, 16, False), ("bfloat16", 1024, 4, False),
        ("bfloat16", 1024, 4, True)]
_defines, _kernels = capacity.MmaPlan.defines, persistent._kernel


def _split_barrier(value) -> None:
    """Builds with SPLIT_BARRIER=value (a kernel cache of their own), or the defaults (None)."""
    if value is None:
        capacity.MmaPlan.defines, persistent._kernel = _defines, _kernels
        return
    capacity.MmaPlan.defines = lambda plan: {**_defines(plan), "SPLIT_BARRIER": value}
    persistent._kernel = persistent._remembered(_kernels.__wrapped__)


def measure(dtype, hidden, batch, tagged, repeats):
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    out = {"dtype": dtype, "hidden": hidden, "batch": batch, "tagged": tagged}
    base = persistent.plans_for(config)["forward"].with_exchange(tagged)
    prepared = persistent.prepare(config, weights)
    for projection, plan in (("gemm", base.without_input_projection()), ("in_kernel", base)):
        for split in ((0,) if tagged else (0, 1)):
            _split_barrier(split)
            try:
                launch = kernel_launcher(config, prepared, x, h0, c0, plan)
                out[f"{projection}_split{split}_us"] = _median_ms(launch, repeats) * 1e3 / STEPS
            except Exception as exc:  # noqa: BLE001 - recorded in the row
                out[f"{projection}_split{split}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
            finally:
                _split_barrier(None)
    return out


def markdown(rows):
    lines = ["| dtype | H | B | exchange | GEMM + grid.sync | GEMM + split | in-kernel + grid.sync | in-kernel + split |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["dtype"], str(r["hidden"]), str(r["batch"]), "tagged" if r["tagged"] else "grid"]
        cells += [fmt(r.get(f"{p}_split{s}_us")) for p in ("gemm", "in_kernel") for s in (0, 1)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    args, out = bench_args(argv)
    measure_rows(out, "probe_v12_barrier", bench_meta(), ROWS,
                 lambda dtype, hidden, batch, tagged: measure(dtype, hidden, batch, tagged, args.repeats), markdown)


if __name__ == "__main__":
    main()
