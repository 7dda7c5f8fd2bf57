"""Benchmark of the `persistent` strategy against torch.nn.LSTM (cuDNN) in the same process.

T=256, 1 layer, input=hidden, random inputs (never zeros), CUDA events, median of repeats.
Rows: forward us/step and forward+backward ms for persistent and cuDNN (PyTorch defaults: TF32
allowed for fp32), plus a strict-fp32 cuDNN column (TF32 off) for fp32 rows; sweeps over batch and
hidden size for the plots; the capacity edge (largest H that runs, the error one size above).

    python benchmarks/bench_persistent.py [--out DIR] [--quick]
Writes DIR/persistent_bench.json, DIR/persistent_bench.md and DIR/persistent_*.png.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

STEPS = 256
SYNC_FLOOR_US = {"H100": 1.18, "H200": 0.99}  # cooperative grid.sync() (shared/h100-baselines.md)
TARGETS = {("float32", 256, 1): 1.6, ("float32", 512, 4): 1.8, ("float32", 1024, 4): 2.0,
           ("float32", 1024, 8): 2.6, ("bfloat16", 1024, 4): 1.8, ("float16", 1024, 8): 2.0,
           ("float16", 1024, 16): 2.1, ("bfloat16", 2048, 4): 3.5}


FORWARD_WARMUP = 20   # v60: forwards timed after 20 calls (3 before): fp32 H=1024 B=8 read 2.657 µs/step over its first
# 20 replays, 2.640 and 2.599 over two later 200s (results/persistent_v60, call 9); cuDNN's forwards get the same.


def _median_ms(fn, repeats=20, warmup=3):
    import cupy as cp
    from ecornn.timing import median_seconds
    return 1e3 * median_seconds(fn, repeats, xp=cp, warmup=warmup)


def _problem(dtype, hidden, batch, seed=0, layers=1, bidirectional=False):
    """(config, weights, x, h0, c0) on the GPU: input = hidden, T=STEPS, random non-zero values."""
    import cupy as cp
    from ecornn import LSTMConfig, init_weights
    from ecornn.weights import LayerWeights
    config = LSTMConfig(hidden, hidden, layers, bidirectional, dtype, batch, STEPS)
    rng = np.random.default_rng(seed)
    host = init_weights(config, seed=seed, scale=None)
    weights = [LayerWeights(*(cp.asarray(np.asarray(a, np.float32)).astype(_cp_dtype(dtype)) for a in w))
               for w in host]
    x = cp.asarray(rng.standard_normal(config.input_shape, dtype=np.float32)).astype(_cp_dtype(dtype))
    state = cp.asarray(rng.standard_normal(config.state_shape, dtype=np.float32) * 0.5).astype(_cp_dtype(dtype))
    return config, weights, x, state, state.copy()


def _cp_dtype(dtype):
    if dtype == "bfloat16":
        import ml_dtypes
        return ml_dtypes.bfloat16
    return dtype


def persistent_times(dtype, hidden, batch, repeats=20):
    """(forward us/step, forward+backward ms or None, kernel report) of the persistent engine.
    Training may be unsupported where inference fits (backward keeps a 4H x B vector on chip)."""
    import cupy as cp
    from ecornn import NotSupported
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = persistent.prepare(config, weights)
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    fwd_ms = _median_ms(fwd, repeats, warmup=FORWARD_WARMUP)
    # as built: after any fallback (v42's clusters, v43), at the batch the call runs as (v47's padding)
    plans = persistent._built_plans(persistent.run_config(config), False, "auto")
    report = {"forward": persistent.kernel_report(plans["forward"])}
    report["recurrence_only_us"] = _recurrence_ms(config, prepared, x, h0, c0, plans["forward"]) * 1e3 / STEPS
    dy = cp.asarray(np.random.default_rng(1).standard_normal(config.output_shape, dtype=np.float32)).astype(x.dtype)
    zeros_state = cp.zeros(config.state_shape, x.dtype)

    def train():
        out = persistent.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
        persistent.backward(out[3], dy, zeros_state, zeros_state)
    try:
        train_ms = _median_ms(train, max(5, repeats // 2))
        # the backward as built (v43: H=896 B=6's planned one spills and _built_plans falls back to fewer groups)
        report["backward"] = persistent.kernel_report(
            persistent._built_plans(persistent.run_config(config, True), True, "auto")["backward"])
    except NotSupported as exc:
        train_ms, report["backward_error"] = None, str(exc)
    return fwd_ms * 1e3 / STEPS, train_ms, report


def fused_us(dtype, hidden, batch, repeats=20):
    """Forward us/step of the `fused` strategy through the functional API (if that engine exists)."""
    from ecornn import lstm_forward
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    run = lambda: lstm_forward(x, weights, h0, c0, strategy="fused")  # noqa: E731
    return _median_ms(run, repeats) * 1e3 / STEPS


def _recurrence_ms(config, prepared, x, h0, c0, plan):
    """The forward kernel alone (no input GEMM, casts or allocations)."""
    return _median_ms(kernel_launcher(config, prepared, x, h0, c0, plan))


def kernel_launcher(config, prepared, x, h0, c0, plan):
    """A function that launches ``plan``'s forward kernel once on prepared inputs (1 layer, 1 direction).
    A plan with the in-kernel projection (v12, v15) reads x itself: its kernel does that GEMM's work too."""
    import cupy as cp
    from ecornn.engines import persistent
    from ecornn.layouts import pad_columns
    columns = plan.batch * plan.batch_groups if plan.kind in ("mma", "grid") else config.batch
    if columns > config.batch:   # v47: the plan of a padded batch (persistent.run_config) runs on zero columns
        config = config.replace(batch=columns)
        x, h0, c0 = (pad_columns(a, columns) for a in (x, h0, c0))
    hidden, batch = config.hidden_size, config.batch
    mma = plan.kind == "mma"
    built = persistent._final(plan) if plan.kind in ("mma", "grid") else plan
    in_kernel = getattr(built, "in_kernel_projection", False)
    in_kernel_bias = persistent.adds_biases(plan, built)
    if in_kernel:
        xin = persistent._storage16(persistent._f32(x), config.dtype) if mma else persistent._f32(x)
    else:
        xin = persistent._input_projections(persistent._f32(x), prepared.slots[0:1], with_bias=not in_kernel_bias)
    y = cp.empty((STEPS, batch, hidden), cp.float32)
    hT, cT = cp.empty((1, batch, hidden), cp.float32), cp.empty((1, batch, hidden), cp.float32)
    args = (persistent._tiles(prepared, 0, 1, plan), xin, persistent._f32(h0), persistent._f32(c0), y, hT, cT,
            persistent._null(), persistent._null(), np.int32(STEPS), np.int32(hidden), np.int32(plan.units),
            np.int32(plan.blocks_per_dir), np.int32(hidden))
    bias = persistent._biases(prepared, 0, 1) if in_kernel_bias else None
    if in_kernel and mma and built.parts == 2:   # v29: x split (and x_hi W_lo^T) once here; W_hh h0 for h0
        tiles = persistent._tiles(prepared, 0, 1, built, "w_ih")
        args = args[:1] + (persistent._split_input(persistent._f32(x), prepared, 0, 1, built),
                           persistent.split_h0(persistent._f32(h0), prepared.slots[0:1], True)) + args[3:]
        unscale = persistent._split_unscale(prepared, 0, built)
        return lambda: persistent._launch(plan, args, 1, bias, tiles, config.input_size, unscale=unscale)
    if in_kernel:
        tiles = persistent._tiles(prepared, 0, 1, built, "w_ih")
        # v51: a kernel covering part of the inputs gets the GEMM's share, made once here like xw below
        xw_part = persistent.input_part_projection(xin, prepared.slots[0:1], built) if mma and built.input_part else None
        return lambda: persistent._launch(plan, args, 1, bias, tiles, config.input_size, xw_part=xw_part)
    if mma and built.parts == 2:   # v13's fp32 split (v34: h0 as the split reads it)
        args = args[:2] + (persistent.split_h0(persistent._f32(h0), prepared.slots[0:1], False),) + args[3:]
        unscale = persistent._split_unscale(prepared, 0, built)
        return lambda: persistent._launch(plan, args, 1, bias, unscale=unscale)
    return lambda: persistent._launch(plan, args, 1, bias)


def training_call(dtype, hidden, batch, seed=0):
    """(train, prepared): one training call of the persistent engine on prepared weights (forward with
    training=True, then the backward with a random 16-bit-or-fp32 dy of x's dtype and zero dhT, dcT)."""
    import cupy as cp
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=seed)
    prepared = persistent.prepare(config, weights)
    dy = cp.asarray(np.random.default_rng(1).standard_normal(config.output_shape, dtype=np.float32)).astype(x.dtype)
    zeros = cp.zeros(config.state_shape, x.dtype)

    def train():
        out = persistent.forward(config, x, weights, h0, c0, training=True, prepared=prepared)
        persistent.backward(out[3], dy, zeros, zeros)
    return train, prepared


def cudnn_times(dtype, hidden, batch, tf32=True, repeats=20):
    import torch
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    tdtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    lstm = torch.nn.LSTM(hidden, hidden, 1).cuda().to(tdtype)
    x = torch.randn(STEPS, batch, hidden, device="cuda", dtype=tdtype)
    h0 = torch.randn(1, batch, hidden, device="cuda", dtype=tdtype) * 0.5
    c0 = torch.randn(1, batch, hidden, device="cuda", dtype=tdtype) * 0.5

    def fwd():
        with torch.no_grad():
            lstm(x, (h0, c0))

    def train():
        xg = x.detach().requires_grad_(True)
        y, _ = lstm(xg, (h0, c0))
        y.backward(torch.ones_like(y))

    def timed(fn, reps, warmup=3):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        out = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); fn(); b.record(); b.synchronize()
            out.append(a.elapsed_time(b))
        return float(np.median(out))
    result = timed(fwd, repeats, FORWARD_WARMUP) * 1e3 / STEPS, timed(train, max(5, repeats // 2))
    torch.backends.cudnn.allow_tf32 = True
    return result


def row(dtype, hidden, batch, strict=True, repeats=20):
    entry = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": STEPS}
    try:
        us, train_ms, entry["kernels"] = persistent_times(dtype, hidden, batch, repeats)
        entry["persistent_us"] = us
        if train_ms is not None:
            entry["persistent_train_ms"] = train_ms
    except Exception as exc:  # NotSupported or a failure: recorded, never hidden
        entry["persistent_error"] = f"{type(exc).__name__}: {exc}"
    try:
        entry["fused_us"] = fused_us(dtype, hidden, batch, repeats)
    except Exception as exc:
        entry["fused_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    add_cudnn(entry, dtype, hidden, batch, repeats, strict=dtype == "float32" and strict)
    entry["target_us"] = TARGETS.get((dtype, hidden, batch))
    return entry


def capacity_edge(dtype="float32", batch=4):
    """Largest H (step 64) that the model admits and that runs; the error one step above."""
    from ecornn import NotSupported
    from ecornn.engines import persistent_capacity as cap
    from ecornn.engines import persistent
    props = persistent._props()
    out = {"batch": batch}
    for pass_name in ("forward", "backward"):
        largest = cap.largest_hidden(props, batch, pass_name, step=64)
        out[f"{pass_name}_largest_hidden"] = largest
    largest = min(out["forward_largest_hidden"], out["backward_largest_hidden"])
    try:
        us, train_ms, _ = persistent_times(dtype, largest, batch, repeats=5)
        out.update(runs_hidden=largest, runs_us=us, runs_train_ms=train_ms)
    except Exception as exc:
        out["runs_error"] = f"{type(exc).__name__}: {exc}"
    from ecornn import LSTMConfig
    try:
        cap.plan_config(props, LSTMConfig(largest + 64, largest + 64, 1, False, dtype, batch, STEPS), training=True)
    except NotSupported as exc:
        out["above_error"] = str(exc)
    return out


def fmt(v, spec=".2f"):
    """A table cell: ``v`` formatted, or "-" when missing (the benchmarks' markdown tables)."""
    return "-" if v is None else format(v, spec)


def ab_table(rows, head: str, cells, lead=("hidden", "batch")) -> str:
    """The A/B benches' table (v11-v14): ``head``, then per row its ``lead`` fields and ``cells(r)``,
    or the row's error; a mode's own error (ab_modes.measure_modes) follows the row's cells."""
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        body = [f"error: {r['error'][:200]}"] if "error" in r else cells(r)
        body += [f"{k[:-len('_error')]} error: {str(v)[:200]}" for k, v in r.items()
                 if k.endswith("_error") and k != "cudnn_error" and "error" not in r]
        lines.append("| " + " | ".join([str(r[k]) for k in lead] + body) + " |")
    return "\n".join(lines)


def pair_table(rows, first: str, second: str, labels: tuple) -> str:
    """The two-mode A/B table (v16, v18, v19): whole forward, kernel and fwd+bwd of modes ``first``
    and ``second`` (column ``labels``), cuDNN's, and the ratios to cuDNN of ``first``."""
    a, b = labels
    head = (f"| dtype | H | B | fwd µs/step {a} | {b} | kernel {a} | {b} | cuDNN fwd | fwd+bwd ms {a} | {b} | "
            "cuDNN fwd+bwd | fwd vs cuDNN | fwd+bwd vs cuDNN |")

    def cells(r):
        return [fmt(r.get(f"{first}_graph_fwd_us")), fmt(r.get(f"{second}_graph_fwd_us")),
                fmt(r.get(f"{first}_kernel_us")), fmt(r.get(f"{second}_kernel_us")), fmt(r.get("cudnn_us")),
                fmt(r.get(f"{first}_train_ms")), fmt(r.get(f"{second}_train_ms")), fmt(r.get("cudnn_train_ms"))
                ] + cudnn_ratios(r, r.get(f"{first}_graph_fwd_us"), r.get(f"{first}_train_ms"))
    return ab_table(rows, head, cells, lead=("dtype", "hidden", "batch"))


def cudnn_ratios(r, fwd_us, train_ms) -> list:
    """Cells: cuDNN's forward and fwd+bwd time over ``fwd_us`` and ``train_ms`` (speed-ups)."""
    c, ct = r.get("cudnn_us"), r.get("cudnn_train_ms")
    return [fmt(c / fwd_us if c and fwd_us else None) + "x", fmt(ct / train_ms if ct and train_ms else None) + "x"]


def add_cudnn(entry: dict, dtype, hidden, batch, repeats, strict=False) -> dict:
    """cuDNN's forward µs/step and fwd+bwd ms into ``entry`` (and TF32-off ones with ``strict``);
    a failure is recorded under "cudnn_error", never hidden."""
    try:
        entry["cudnn_us"], entry["cudnn_train_ms"] = cudnn_times(dtype, hidden, batch, True, repeats)
        if strict:
            entry["cudnn_strict_us"], entry["cudnn_strict_train_ms"] = cudnn_times(dtype, hidden, batch, False, repeats)
    except Exception as exc:
        entry["cudnn_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return entry


def measured_row(measure, dtype, hidden, batch, repeats, *args) -> dict:
    """One benchmark row: ``measure(dtype, hidden, batch, repeats, *args)`` (a dict) with the issue's
    target and cuDNN's numbers; a failure is recorded under "error", never hidden."""
    entry = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": STEPS,
             "target_us": TARGETS.get((dtype, hidden, batch))}
    try:
        entry.update(measure(dtype, hidden, batch, repeats, *args))
    except Exception as exc:
        entry["error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
    return add_cudnn(entry, dtype, hidden, batch, repeats)


def bench_args(argv, repeats: int = 20, configure=None):
    """(args, out): OUT_DIR [--repeats N] plus what ``configure(parser)`` adds, with OUT_DIR created."""
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=repeats)
    if configure is not None:
        configure(parser)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    return args, out


def measure_rows(out: Path, stem: str, meta: dict, specs, measure, markdown) -> list:
    """measure(*spec) per spec, OUT/stem.{json,md} saved after every row (a timeout keeps what was
    measured), the table printed at the end."""
    rows = []
    for spec in specs:
        rows.append(measure(*spec))
        save_rows(out, stem, meta, rows, markdown(rows))
    print(markdown(rows))
    return rows


def ab_bench_main(argv, rows: list, row, markdown, name: str, order_flag: str, order_help: str) -> None:
    """The command line of the A/B benches (v11, v12, v13): OUT_DIR [--repeats N] [--rows N] [--start K]
    [--name NAME] [order_flag]; row(dtype, hidden, batch, repeats, order_flag's value) per row of ``rows``."""
    def configure(parser):
        parser.add_argument("--rows", type=int, default=len(rows))
        parser.add_argument("--start", type=int, default=0, help="skip the first START rows")
        parser.add_argument("--name", default=name)
        parser.add_argument(order_flag, action="store_true", help=order_help)
    args, out = bench_args(argv, configure=configure)
    order = getattr(args, order_flag.lstrip("-").replace("-", "_"))
    measure_rows(out, args.name, bench_meta(), rows[args.start:args.start + args.rows],
                 lambda dtype, hidden, batch: row(dtype, hidden, batch, args.repeats, order), markdown)


def save_rows(out: Path, stem: str, meta: dict, rows: list, table: str = None, extra: dict = None) -> None:
    """OUT/stem.json (meta, rows and ``extra``) and, with ``table``, OUT/stem.md headed by the meta."""
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows, **(extra or {})}, indent=1, default=str))
    if table is not None:
        (out / f"{stem}.md").write_text(f"{json.dumps(meta, default=str)}\n\n{table}\n")


def markdown(rows):
    lines = ["| dtype | H | B | persistent µs/step | kernel only | cuDNN µs/step | cuDNN TF32-off | speed-up | target | "
             "persistent fwd+bwd ms | cuDNN fwd+bwd ms | train speed-up |", "|" + "---|" * 12]
    for r in rows:
        sp = r["cudnn_us"] / r["persistent_us"] if "persistent_us" in r and "cudnn_us" in r else None
        tsp = (r["cudnn_train_ms"] / r["persistent_train_ms"]
               if "persistent_train_ms" in r and "cudnn_train_ms" in r else None)
        kernel = r.get("kernels", {}).get("recurrence_only_us")
        lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | {fmt(r.get('persistent_us'))} | {fmt(kernel)} | "
                     f"{fmt(r.get('cudnn_us'))} | {fmt(r.get('cudnn_strict_us'))} | {fmt(sp)}x | "
                     f"{fmt(r.get('target_us'), '.1f')} | {fmt(r.get('persistent_train_ms'))} | "
                     f"{fmt(r.get('cudnn_train_ms'))} | {fmt(tsp)}x |")
        if "backward_error" in r.get("kernels", {}):
            lines.append(f"|  | | | training: {r['kernels']['backward_error'][:160]} ||||||||")
        if "persistent_error" in r:
            lines.append(f"|  | | | error: {r['persistent_error'][:160]} ||||||||")
    return "\n".join(lines)


def plot(rows, key, fixed, out_png, title, device_name=""):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sel = [r for r in rows if r.get("sweep") == key]
    if not sel:
        return
    xs = [r[key] for r in sel]
    fig, ax = plt.subplots(figsize=(6, 4))
    for field, label in (("persistent_us", "persistent"), ("fused_us", "fused"), ("cudnn_us", "cuDNN (TF32 allowed)"),
                         ("cudnn_strict_us", "cuDNN TF32 off")):
        pts = [(x, r[field]) for x, r in zip(xs, sel) if field in r]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=label)
    floor = SYNC_FLOOR_US["H200" if "H200" in device_name else "H100"]
    ax.axhline(floor, color="gray", linestyle="--", label=f"grid.sync floor {floor} µs")
    ax.set_xlabel(key), ax.set_ylabel("forward µs / step"), ax.set_yscale("log")
    ax.set_title(f"{title} ({fixed}), T={STEPS}, fp32, {device_name}")
    ax.legend(), fig.tight_layout(), fig.savefig(out_png, dpi=120)


def bench_meta() -> dict:
    """Device, versions and time of a benchmark run (printed, and saved with its results)."""
    import cupy as cp
    import torch
    from ecornn.gpu import device_properties
    meta = {"device": device_properties(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "cupy": cp.__version__, "python": platform.python_version(), "numpy": np.__version__,
            "time": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    print(json.dumps(meta, default=str), flush=True)
    return meta


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    rows = []
    headline = [("float32", 256, 1), ("float32", 512, 4), ("float32", 1024, 4), ("float32", 1024, 8),
                ("float32", 512, 1), ("float32", 512, 8), ("float32", 1024, 1),
                ("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 1024, 4), ("bfloat16", 2048, 4)]
    for dtype, hidden, batch in headline:
        rows.append(row(dtype, hidden, batch))
        print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    if not args.quick:
        for batch in (1, 2, 4, 8, 16, 32):
            r = row("float32", 1024, batch, strict=True, repeats=10)
            r["sweep"] = "batch"
            rows.append(r)
        for hidden in (256, 512, 768, 1024, 1280, 1536):
            r = row("float32", hidden, 4, strict=True, repeats=10)
            r["sweep"] = "hidden"
            rows.append(r)
    edge = capacity_edge()
    print("capacity:", json.dumps(edge), flush=True)
    table = markdown(rows)
    (out / "persistent_bench.json").write_text(json.dumps({"meta": meta, "rows": rows, "capacity": edge},
                                                          indent=1, default=str))
    (out / "persistent_bench.md").write_text(f"{json.dumps(meta, default=str)}\n\n{table}\n\ncapacity: {json.dumps(edge)}\n")
    name = meta["device"]["name"]
    plot(rows, "batch", "H=1024", out / "persistent_vs_batch.png", "µs/step vs batch", name)
    plot(rows, "hidden", "B=4", out / "persistent_vs_hidden.png", "µs/step vs hidden", name)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
