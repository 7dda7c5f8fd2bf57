"""Benchmark of the persistent v3 cluster forward against the v2 grid forward and torch.nn.LSTM
(cuDNN) in the same process: fp32, T=256, 1 layer, input=hidden, inference, CUDA events, median.

Per row: whole forward µs/step (input GEMM + recurrence + casts) and kernel-only µs/step (the
recurrence launch alone) for variant="cluster" and variant="grid", cuDNN with PyTorch defaults and
with TF32 off, the compiled cluster kernel's registers/smem/active clusters and the model's
prediction. The two-layer bidirectional row shows the two directions as two clusters of one launch.

    python benchmarks/bench_persistent_cluster.py OUT_DIR [--repeats N]
Writes OUT_DIR/persistent_cluster_bench.json and OUT_DIR/persistent_cluster_bench.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from bench_persistent import STEPS, _median_ms, bench_meta, cudnn_times, fmt, save_rows

ROWS = [(256, 1, 1, False), (128, 1, 1, False), (256, 4, 1, False), (512, 4, 1, False), (256, 1, 2, True)]
TARGETS = {(256, 1): 1.6, (512, 4): 1.8}


def _problem(hidden, batch, layers, bidir, seed=0):
    import cupy as cp
    from ecornn import LSTMConfig, init_weights
    from ecornn.weights import LayerWeights
    config = LSTMConfig(hidden, hidden, layers, bidir, "float32", batch, STEPS)
    rng = np.random.default_rng(seed)
    weights = [LayerWeights(*(cp.asarray(np.asarray(a, np.float32)) for a in w))
               for w in init_weights(config, seed=seed, scale=None)]
    x = cp.asarray(rng.standard_normal(config.input_shape, dtype=np.float32))
    h0 = cp.asarray(rng.standard_normal(config.state_shape, dtype=np.float32) * 0.5)
    return config, weights, x, h0, h0.copy()


def _kernel_only_ms(config, prepared, x, h0, c0, variant):
    """One layer's recurrence launch alone (no input GEMM, casts or allocations)."""
    import cupy as cp
    from ecornn.engines import persistent as p
    dirs, hidden, batch = config.num_directions, config.hidden_size, config.batch
    plan = p.cluster_plan(config) if variant == "cluster" else p._plans(config, False)["forward"]
    xw = cp.ascontiguousarray(p._input_projections(x, prepared.slots[:dirs]))
    y = cp.empty((STEPS, batch, dirs * hidden), cp.float32)
    hT, cT = cp.empty((dirs, batch, hidden), cp.float32), cp.empty((dirs, batch, hidden), cp.float32)
    args = (p._tiles(prepared, 0, dirs, plan), xw, h0[:dirs], c0[:dirs], y, hT, cT, p._null(), p._null(),
            np.int32(STEPS), np.int32(hidden), np.int32(plan.units))
    if variant == "cluster":
        return _median_ms(lambda: p._launch_cluster(plan, args + (np.int32(dirs * hidden),)))
    return _median_ms(lambda: p._launch(plan, args + (np.int32(plan.blocks_per_dir), np.int32(dirs * hidden)), dirs))


def variant_times(config, weights, x, h0, c0, variant, repeats):
    """(whole forward µs/step, kernel-only µs/step of the first layer)."""
    from ecornn.engines import persistent as p
    prepared = p.prepare(config, weights)
    fwd = lambda: p.forward(config, x, weights, h0, c0, prepared=prepared, variant=variant)  # noqa: E731
    whole = _median_ms(fwd, repeats) * 1e3 / STEPS
    return whole, _kernel_only_ms(config, prepared, x, h0, c0, variant) * 1e3 / STEPS


def row(hidden, batch, layers, bidir, repeats):
    from ecornn.engines import persistent as p
    from ecornn.engines import persistent_capacity as cap
    entry = {"hidden": hidden, "batch": batch, "layers": layers, "bidirectional": bidir, "steps": STEPS,
             "target_us": TARGETS.get((hidden, batch)) if layers == 1 and not bidir else None}
    config, weights, x, h0, c0 = _problem(hidden, batch, layers, bidir)
    for variant in ("cluster", "grid"):
        try:
            entry[f"{variant}_us"], entry[f"{variant}_kernel_us"] = variant_times(config, weights, x, h0, c0,
                                                                                   variant, repeats)
        except Exception as exc:  # NotSupported or a failure: recorded, never hidden
            entry[f"{variant}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    try:
        plan = p.cluster_plan(config)
        entry["cluster_kernel"] = p.cluster_kernel_report(plan)
        entry["predicted_kernel_us"] = cap.predicted_cluster_us_per_step(plan)
    except Exception as exc:
        entry["cluster_kernel_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    if layers == 1 and not bidir:
        try:
            entry["cudnn_us"], _ = cudnn_times("float32", hidden, batch, True, repeats)
            entry["cudnn_strict_us"], _ = cudnn_times("float32", hidden, batch, False, repeats)
        except Exception as exc:
            entry["cudnn_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return entry


def markdown(rows):
    lines = ["| H | B | layers x dirs | cluster µs/step | cluster kernel | predicted kernel | grid µs/step | "
             "grid kernel | cuDNN | cuDNN TF32 off | cluster vs grid | cluster vs cuDNN | target | kernel |",
             "|" + "---|" * 14]
    for r in rows:
        c, g, d = r.get("cluster_us"), r.get("grid_us"), r.get("cudnn_us")
        k = r.get("cluster_kernel", {})
        info = (f"C={k['cluster']} {k['threads']}thr {k['registers']}reg {k['smem_bytes'] // 1024}KB "
                f"spill={k['local_bytes']} clusters={k['max_active_clusters']}") if k else "-"
        lines.append(f"| {r['hidden']} | {r['batch']} | {r['layers']}x{2 if r['bidirectional'] else 1} | "
                     f"{fmt(c)} | {fmt(r.get('cluster_kernel_us'))} | {fmt(r.get('predicted_kernel_us'))} | "
                     f"{fmt(g)} | {fmt(r.get('grid_kernel_us'))} | {fmt(d)} | {fmt(r.get('cudnn_strict_us'))} | "
                     f"{fmt(g / c if c and g else None)}x | {fmt(d / c if c and d else None)}x | "
                     f"{fmt(r.get('target_us'), '.1f')} | {info} |")
        for key in ("cluster_error", "grid_error", "cluster_kernel_error", "cudnn_error"):
            if key in r:
                lines.append(f"| | | | {key}: {r[key][:200]} |" + " |" * 10)
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    rows = []
    for spec in ROWS:
        rows.append(row(*spec, args.repeats))
        print(markdown(rows[-1:]).split("\n", 2)[2], flush=True)
    table = markdown(rows)
    save_rows(out, "persistent_cluster_bench", meta, rows, table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
