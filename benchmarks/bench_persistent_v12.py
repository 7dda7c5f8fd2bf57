"""v12 benchmark: the tensor-core forward with the input projection inside the kernel against the
projection as a GEMM before it (IN_KERNEL_PROJECTION=False, the ablation), and cuDNN in the same
process (torch.nn.LSTM, PyTorch defaults). Per row (T=256, 1 layer, input=hidden, random non-zero
inputs, CUDA events, median): the whole forward (graph replay) and fwd+bwd ms in either mode, the
forward kernel alone in either mode (with the projection it does the GEMM's work too), cuDNN's
forward µs/step and fwd+bwd ms. "In kernel" is forced (IN_KERNEL_PROJECTION=True) wherever it fits;
the ratios to cuDNN are those of the mode "auto" takes (capacity.input_projection_pays).

    python benchmarks/bench_persistent_v12.py OUT_DIR [--repeats N] [--rows N] [--name NAME] [--gemm-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v12_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, _problem, ab_bench_main, fmt, kernel_launcher, measured_row  # noqa: E402
from bench_persistent_v5 import _train_ms  # noqa: E402

from ecornn.engines import persistent  # noqa: E402

ROWS = [("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 1024, 4), ("bfloat16", 2048, 4),
        ("float16", 1024, 1), ("bfloat16", 512, 8)]
MODES = {"in_kernel": True, "gemm": False}


def measure(dtype, hidden, batch, repeats, gemm_first=False):
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
    out = {"auto_in_kernel": persistent._final(persistent.plans_for(config, True)["forward"]).input_k_tiles > 0}
    for mode in sorted(MODES, reverse=not gemm_first):   # "in_kernel" first unless gemm_first
        persistent.IN_KERNEL_PROJECTION = MODES[mode]
        try:
            plan = persistent._final(persistent.plans_for(config, True)["forward"])
            out[f"{mode}_plan"] = plan.describe()
            prepared = persistent.prepare(config, weights)   # its graphs are this mode's
            out[f"kernel_{mode}_us"] = _median_ms(kernel_launcher(config, prepared, x, h0, c0, plan),
                                                  repeats) * 1e3 / STEPS
            fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
            out[f"graph_fwd_{mode}_us"] = _median_ms(fwd, repeats) * 1e3 / STEPS
            out[f"train_{mode}_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
        finally:
            persistent.IN_KERNEL_PROJECTION = "auto"
    out["projection_fits"] = "input projection in the kernel" in out["in_kernel_plan"]
    return out


def row(dtype, hidden, batch, repeats, gemm_first=False):
    return measured_row(measure, dtype, hidden, batch, repeats, gemm_first)


def markdown(rows):
    head = ("| dtype | H | B | auto takes | fwd µs/step in kernel | GEMM | target | kernel in kernel | GEMM | cuDNN fwd | "
            "fwd+bwd ms in kernel | GEMM | cuDNN fwd+bwd | auto fwd vs cuDNN | auto fwd+bwd vs cuDNN |")
    lines = [head, "|" + "---|" * 15]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | error: {r['error'][:200]} |")
            continue
        mode = "in_kernel" if r.get("auto_in_kernel") else "gemm"   # what "auto" runs
        g, c = r.get(f"graph_fwd_{mode}_us"), r.get("cudnn_us")
        t, ct = r.get(f"train_{mode}_ms"), r.get("cudnn_train_ms")
        cells = [r["dtype"], str(r["hidden"]), str(r["batch"]), "in kernel" if r.get("auto_in_kernel") else "GEMM",
                 fmt(r.get("graph_fwd_in_kernel_us")) if r.get("projection_fits") else "doesn't fit",
                 fmt(r.get("graph_fwd_gemm_us")), fmt(r.get("target_us"), ".1f"),
                 fmt(r.get("kernel_in_kernel_us")), fmt(r.get("kernel_gemm_us")), fmt(c), fmt(r.get("train_in_kernel_ms")),
                 fmt(r.get("train_gemm_ms")), fmt(ct), fmt(c / g if c and g else None) + "x",
                 fmt(ct / t if ct and t else None) + "x"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v12_bench", "--gemm-first", "time the GEMM mode first (order bias check)")


if __name__ == "__main__":
    main()
