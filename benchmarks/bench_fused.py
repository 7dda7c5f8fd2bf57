"""Benchmark of the `fused` strategy against torch.nn.LSTM (cuDNN, and the unfused per-op path).

Same process, same inputs (random, never zeros), CUDA events, median of ``--reps`` after warm-up.
Reports µs per timestep for forward (inference) and forward+backward (training forward + all
gradients). Rows:
  grid      T=256, 1 layer, input=hidden, H x B x dtype (fp32 fused strict vs cuDNN TF32-off, plus
            fused TF32 vs cuDNN default; fp16/bf16 vs cuDNN default); unfused = cuDNN disabled.
  layers    a 2-layer and a bidirectional row (wavefront on/off).
  ablation  graph / second stream / layout (interleave, prepared weights) / epilogue on/off.
  mma       (--mma only) fused v3: fp16/bf16, the one-kernel-per-step tensor-core path (epilogue
            on) vs cuBLAS + pointwise (epilogue off) vs cuDNN, H x B from --hidden / --batch.

    python benchmarks/bench_fused.py --out DIR [--quick]
    python benchmarks/bench_fused.py --mma --out DIR [--hidden 256,1024 --batch 64,128 --dtypes float16]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import numpy as np

STEPS = 256


def _median_ms(fn, reps, warmup, sync):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        start, stop = sync.event(), sync.event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(sync.elapsed(start, stop))
    return statistics.median(times)


class _CupySync:
    def __init__(self):
        import cupy
        self.cupy = cupy

    def __call__(self):
        self.cupy.cuda.get_current_stream().synchronize()

    def event(self):
        return self.cupy.cuda.Event()

    def elapsed(self, a, b):
        return self.cupy.cuda.get_elapsed_time(a, b)


class _TorchSync:
    def __init__(self):
        import torch
        self.torch = torch

    def __call__(self):
        self.torch.cuda.synchronize()

    def event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def elapsed(self, a, b):
        return a.elapsed_time(b)


# ---- fused ----------------------------------------------------------------------------------

def _gpu_array(rng, shape, dtype):
    import cupy

    from ecornn.engines import fused
    from ecornn.weights import to_dtype
    host = to_dtype(rng.standard_normal(shape, dtype=np.float32), dtype)
    if dtype == "bfloat16" and fused.bf16_array_dtype() is None:
        host = host.view(np.uint16)
    return cupy.asarray(host)


def time_fused(cfg, reps, warmup, prepared=True, **flags):
    """(forward ms, forward+backward ms) for one config under FusedOptions ``flags``."""
    from ecornn.engines import fused
    from ecornn.weights import LayerWeights, init_weights
    rng = np.random.default_rng(0)
    weights = [LayerWeights(*(_gpu_array(rng, a.shape, cfg.dtype) for a in w))
               for w in init_weights(cfg, seed=1)]
    x = _gpu_array(rng, (cfg.seq_len, cfg.batch, cfg.input_size), cfg.dtype)
    h0 = _gpu_array(rng, cfg.state_shape, cfg.dtype)
    c0 = _gpu_array(rng, cfg.state_shape, cfg.dtype)
    dy = _gpu_array(rng, (cfg.seq_len, cfg.batch, cfg.num_directions * cfg.hidden_size), cfg.dtype)
    sync = _CupySync()
    with fused.using(**flags):
        extra = {"prepared": fused.prepare(cfg, weights)} if prepared else {}

        def fwd():
            fused.forward(cfg, x, weights, h0, c0, **extra)

        def train():
            y, h, c, res = fused.forward(cfg, x, weights, h0, c0, training=True, **extra)
            fused.backward(res, dy, h0, c0)

        result = (_median_ms(fwd, reps, warmup, sync), _median_ms(train, reps, warmup, sync))
    fused.clear_cache()
    sync.cupy.get_default_memory_pool().free_all_blocks()
    return result


# ---- torch ----------------------------------------------------------------------------------

def time_torch(cfg, reps, warmup, mode):
    """mode: "cudnn" (PyTorch defaults), "strict" (cuDNN, TF32 off), "unfused" (cuDNN disabled)."""
    import torch
    dtype = getattr(torch, cfg.dtype)
    lstm = torch.nn.LSTM(cfg.input_size, cfg.hidden_size, cfg.num_layers,
                         bidirectional=cfg.bidirectional).cuda().to(dtype)
    x = torch.randn(cfg.seq_len, cfg.batch, cfg.input_size, device="cuda", dtype=dtype, requires_grad=True)
    state = torch.randn(cfg.num_layers * cfg.num_directions, cfg.batch, cfg.hidden_size,
                        device="cuda", dtype=dtype)
    dy = torch.randn(cfg.seq_len, cfg.batch, cfg.num_directions * cfg.hidden_size, device="cuda", dtype=dtype)
    sync = _TorchSync()

    def fwd():
        with torch.no_grad():
            lstm(x, (state, state))

    def train():
        y, _ = lstm(x, (state, state))
        y.backward(dy)

    # flags() sets allow_tf32 itself (default True), so strictness must be passed to it
    import inspect
    params = inspect.signature(torch.backends.cudnn.flags).parameters
    strict = {"allow_tf32": mode != "strict"} if "allow_tf32" in params else {}
    try:
        with torch.backends.cudnn.flags(enabled=mode != "unfused", **strict):
            if mode == "strict" and torch.backends.cudnn.allow_tf32:
                raise RuntimeError("cuDNN TF32 still allowed: no strict comparator")
            result = (_median_ms(fwd, reps, warmup, sync), _median_ms(train, reps, warmup, sync))
    except RuntimeError as exc:  # e.g. a dtype this path does not run
        result = (float("nan"), float("nan"))
        print(f"  torch {mode} {cfg.dtype}: {str(exc).splitlines()[0][:100]}", file=sys.stderr)
    torch.cuda.empty_cache()
    return result


# ---- tables ---------------------------------------------------------------------------------

def _us(ms, cfg):
    return 1000.0 * ms / cfg.seq_len


def grid_cells(hs, bs, dtypes):
    """(config, row stub) of every benchmark cell: one layer, input = hidden, T = STEPS."""
    from ecornn import LSTMConfig
    for dtype in dtypes:
        for h in hs:
            for b in bs:
                yield (LSTMConfig(input_size=h, hidden_size=h, batch=b, seq_len=STEPS, dtype=dtype),
                       {"dtype": dtype, "H": h, "B": b})


def grid_rows(hs, bs, dtypes, reps, warmup):
    rows = []
    for cfg, row in grid_cells(hs, bs, dtypes):
        row["fused"] = time_fused(cfg, reps, warmup)
        row["cudnn"] = time_torch(cfg, reps, warmup, "cudnn")
        row["unfused"] = time_torch(cfg, reps, warmup, "unfused")
        if cfg.dtype == "float32":
            row["fused_tf32"] = time_fused(cfg, reps, warmup, tf32=True)
            row["cudnn_strict"] = time_torch(cfg, reps, warmup, "strict")
        for key in [k for k in row if isinstance(row[k], tuple)]:
            row[key] = [_us(v, cfg) for v in row[key]]
        rows.append(row)
        print(_grid_line(row), flush=True)
    return rows


def _ratio(a, b):
    return b / a if a and a == a and b == b else float("nan")


def _grid_line(row):
    f, c, u = row["fused"], row["cudnn"], row["unfused"]
    text = (f"{row['dtype']:>8} H={row['H']:<5} B={row['B']:<4} fused {f[0]:7.1f} / {f[1]:7.1f} "
            f"cudnn {c[0]:7.1f} / {c[1]:7.1f} unfused {u[0]:7.1f} / {u[1]:7.1f} us/step (fwd / fwd+bwd)")
    if "cudnn_strict" in row:
        s, t = row["cudnn_strict"], row["fused_tf32"]
        text += f" | strict cudnn {s[0]:7.1f} / {s[1]:7.1f} | fused tf32 {t[0]:7.1f} / {t[1]:7.1f}"
    return text


def grid_markdown(rows):
    out = ["| dtype | H | B | fused fwd | cuDNN fwd | fwd vs cuDNN | fused f+b | cuDNN f+b | f+b vs cuDNN "
           "| unfused fwd | unfused f+b | vs unfused (fwd/f+b) | strict cuDNN fwd / f+b | fused TF32 fwd / f+b |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f, c, u = r["fused"], r["cudnn"], r["unfused"]
        fp32 = r["dtype"] == "float32"
        base = c if not fp32 else r["cudnn_strict"]  # strict fused is compared with strict cuDNN
        strict = f"{r['cudnn_strict'][0]:.1f} / {r['cudnn_strict'][1]:.1f}" if fp32 else ""
        t = r.get("fused_tf32")
        tf32 = (f"{t[0]:.1f} / {t[1]:.1f} ({_ratio(t[0], c[0]):.2f}x / {_ratio(t[1], c[1]):.2f}x vs cuDNN)"
                if fp32 else "")
        out.append(f"| {r['dtype']} | {r['H']} | {r['B']} | {f[0]:.1f} | {c[0]:.1f} | "
                   f"{_ratio(f[0], base[0]):.2f}x | {f[1]:.1f} | {c[1]:.1f} | {_ratio(f[1], base[1]):.2f}x | "
                   f"{u[0]:.1f} | {u[1]:.1f} | {_ratio(f[0], u[0]):.2f}x / {_ratio(f[1], u[1]):.2f}x | "
                   f"{strict} | {tf32} |")
    out.append("")
    out.append("µs per timestep, T=256, 1 layer, input=hidden. 'vs cuDNN' = cuDNN time / fused time "
               "(>1 means fused is faster); fp32 ratios use cuDNN with TF32 off (fused fp32 is strict).")
    return "\n".join(out)


def strict_rows(hs, bs, reps, warmup):
    """Strict fp32 (TF32 off on both sides): fused vs cuDNN."""
    from ecornn import LSTMConfig
    rows = []
    for h in hs:
        for b in bs:
            cfg = LSTMConfig(input_size=h, hidden_size=h, batch=b, seq_len=STEPS)
            row = {"dtype": "float32", "H": h, "B": b,
                   "fused": [_us(v, cfg) for v in time_fused(cfg, reps, warmup)],
                   "cudnn_strict": [_us(v, cfg) for v in time_torch(cfg, reps, warmup, "strict")]}
            rows.append(row)
            print(row, flush=True)
    return rows


def strict_markdown(rows):
    out = ["## Strict fp32 (TF32 off in fused and in cuDNN)", "",
           "| H | B | fused fwd | strict cuDNN fwd | fwd vs cuDNN | fused f+b | strict cuDNN f+b | f+b vs cuDNN |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f, c = r["fused"], r["cudnn_strict"]
        out.append(f"| {r['H']} | {r['B']} | {f[0]:.1f} | {c[0]:.1f} | {_ratio(f[0], c[0]):.2f}x | "
                   f"{f[1]:.1f} | {c[1]:.1f} | {_ratio(f[1], c[1]):.2f}x |")
    return "\n".join(out)


def layer_rows(reps, warmup, dtypes):
    from ecornn import LSTMConfig
    rows = []
    for dtype in dtypes:
        for layers, bidir in ((2, False), (1, True), (2, True)):
            cfg = LSTMConfig(input_size=512, hidden_size=512, num_layers=layers, bidirectional=bidir,
                             batch=64, seq_len=STEPS, dtype=dtype)
            row = {"dtype": dtype, "layers": layers, "bidirectional": bidir, "H": 512, "B": 64}
            row["fused"] = [_us(v, cfg) for v in time_fused(cfg, reps, warmup)]
            row["fused_no_wavefront"] = [_us(v, cfg) for v in time_fused(cfg, reps, warmup, wavefront=False)]
            row["cudnn"] = [_us(v, cfg) for v in time_torch(cfg, reps, warmup, "cudnn")]
            if dtype == "float32":
                row["cudnn_strict"] = [_us(v, cfg) for v in time_torch(cfg, reps, warmup, "strict")]
            rows.append(row)
            print(row, flush=True)
    return rows


def layers_markdown(rows):
    out = ["| dtype | layers | bidir | fused fwd / f+b | no wavefront fwd / f+b | cuDNN fwd / f+b | strict cuDNN fwd / f+b |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r[k][0]:.1f} / {r[k][1]:.1f}" if k in r else "" for k in
                 ("fused", "fused_no_wavefront", "cudnn", "cudnn_strict")]
        out.append(f"| {r['dtype']} | {r['layers']} | {r['bidirectional']} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("µs per timestep (all layers), H=512, B=64, T=256.")
    return "\n".join(out)


ABLATIONS = [("all on", {}, True), ("graph off", {"graph": False}, True),
             ("second stream off", {"second_stream": False}, True),
             ("layout off (gate-blocked)", {"interleave": False}, True),
             ("weights not prepared (convert per call)", {}, False),
             ("epilogue off (16-bit: cuBLAS + pointwise per step)", {"epilogue": False}, True),
             ("everything off", {"graph": False, "second_stream": False, "wavefront": False,
                                 "interleave": False}, False)]


def ablation_rows(reps, warmup, dtype="float32", h=512, batches=(16, 256)):
    from ecornn import LSTMConfig
    rows = []
    for b in batches:
        cfg = LSTMConfig(input_size=h, hidden_size=h, batch=b, seq_len=STEPS, dtype=dtype)
        for label, flags, prepared in ABLATIONS:
            if "epilogue" in flags and dtype == "float32":
                continue  # fp32 never runs the mma step: the row would repeat "all on"
            fwd, train = time_fused(cfg, reps, warmup, prepared=prepared, **flags)
            rows.append({"dtype": dtype, "H": h, "B": b, "variant": label,
                         "fused": [_us(fwd, cfg), _us(train, cfg)]})
            print(rows[-1], flush=True)
    return rows


def ablation_markdown(rows):
    out = ["| dtype | H | B | variant | fwd µs/step | f+b µs/step | fwd cost vs all on |",
           "|---|---|---|---|---|---|---|"]
    base = {}
    for r in rows:
        key = (r["dtype"], r["B"])
        base.setdefault(key, r["fused"][0])
        out.append(f"| {r['dtype']} | {r['H']} | {r['B']} | {r['variant']} | {r['fused'][0]:.1f} | "
                   f"{r['fused'][1]:.1f} | {r['fused'][0] / base[key]:.2f}x |")
    return "\n".join(out)


def mma_rows(hs, bs, dtypes, reps, warmup, save=None):
    """fused v3 cells: epilogue on (mma step where the size rule allows) vs off vs cuDNN."""
    from ecornn.engines import fused
    rows = []
    for cfg, row in grid_cells(hs, bs, dtypes):
        row["on"] = [_us(v, cfg) for v in time_fused(cfg, reps, warmup)]
        row["step_kernel"] = fused.last_step_kernel
        row["off"] = [_us(v, cfg) for v in time_fused(cfg, reps, warmup, epilogue=False)]
        row["cudnn"] = [_us(v, cfg) for v in time_torch(cfg, reps, warmup, "cudnn")]
        rows.append(row)
        print(_mma_line(row), flush=True)
        if save:
            save(rows)
    return rows


def _mma_line(r):
    on, off, c = r["on"], r["off"], r["cudnn"]
    return (f"{r['dtype']:>8} H={r['H']:<5} B={r['B']:<4} on {on[0]:6.1f} / {on[1]:6.1f}  off {off[0]:6.1f} / "
            f"{off[1]:6.1f}  cudnn {c[0]:6.1f} / {c[1]:6.1f} us/step (fwd / fwd+bwd)  [{r['step_kernel']}]")


def mma_markdown(rows):
    out = ["| dtype | H | B | on fwd | off fwd | cuDNN fwd | on vs off | on vs cuDNN | on f+b | off f+b "
           "| cuDNN f+b | on vs off | on vs cuDNN | step kernel |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        on, off, c = r["on"], r["off"], r["cudnn"]
        out.append(f"| {r['dtype']} | {r['H']} | {r['B']} | {on[0]:.1f} | {off[0]:.1f} | {c[0]:.1f} | "
                   f"{_ratio(on[0], off[0]):.2f}x | {_ratio(on[0], c[0]):.2f}x | {on[1]:.1f} | {off[1]:.1f} | "
                   f"{c[1]:.1f} | {_ratio(on[1], off[1]):.2f}x | {_ratio(on[1], c[1]):.2f}x | {r['step_kernel']} |")
    out.append("")
    out.append("µs per timestep, T=256, 1 layer, input=hidden; on = epilogue on (the mma step where "
               "fused_mma's size rule picks it, else the same as off), off = cuBLAS GEMM + pointwise "
               "per step. Ratios = other time / on time (>1: on is faster).")
    return "\n".join(out)


def _ints(text):
    return tuple(int(v) for v in text.split(","))


def environment():
    import cupy
    import torch

    from ecornn.engines import fused
    from ecornn.gpu import device_properties
    return {"device": device_properties()["name"], "cupy": cupy.__version__, "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "numpy": np.__version__,
            "python": platform.python_version(), "cupy_bfloat16_arrays": str(fused.bf16_array_dtype()),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--quick", action="store_true", help="a subset (first device visit)")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--tag", default="fused")
    parser.add_argument("--strict-only", action="store_true",
                        help="fp32 grid only: strict fused vs cuDNN with TF32 off")
    parser.add_argument("--mma", action="store_true",
                        help="only the fused v3 table: epilogue on/off vs cuDNN (fp16/bf16)")
    parser.add_argument("--hidden", type=_ints, default=(256, 512, 1024, 2048), help="--mma: H list")
    parser.add_argument("--batch", type=_ints, default=(16, 64, 128, 256), help="--mma: B list")
    parser.add_argument("--dtypes", default="float16,bfloat16", help="--mma: dtype list")
    parser.add_argument("--mma-max-gflop", type=float, default=None,
                        help="override fused_mma.MMA_MAX_STEP_GFLOP (e.g. 1e9: the mma step in every "
                             "cell, to measure where it wins and retune the size rule)")
    args = parser.parse_args(argv)
    started = time.time()
    env = environment()
    print(env, flush=True)
    if args.mma:
        from ecornn.engines import fused_mma
        if args.mma_max_gflop is not None:
            fused_mma.MMA_MAX_STEP_GFLOP = args.mma_max_gflop
        env["mma_max_step_gflop"] = fused_mma.MMA_MAX_STEP_GFLOP
        result = {"environment": env, "steps": STEPS, "mma": []}

        def save_mma(rows):
            result["mma"] = rows
            _write_mma(args, result)

        mma_rows(args.hidden, args.batch, args.dtypes.split(","), args.reps, args.warmup, save_mma)
        result["seconds"] = time.time() - started
        print(_write_mma(args, result))
        print(f"benchmark took {result['seconds']:.0f} s")
        return
    if args.quick:
        hs, bs, dtypes = (256, 1024), (16, 64, 256), ("float32", "float16")
    else:
        hs, bs, dtypes = (256, 512, 1024, 2048), (16, 32, 64, 128, 256), ("float32", "float16", "bfloat16")
    result = {"environment": env, "steps": STEPS, "grid": [], "layers": [], "ablation": []}
    if args.strict_only:
        result["strict"] = strict_rows(hs, bs, args.reps, args.warmup)
        text = strict_markdown(result["strict"])
        _write(args, result, extra=text)
        print(text)
        return

    def save():  # after every section, so a run cut short still leaves its tables
        _write(args, result)

    result["ablation"] += ablation_rows(args.reps, args.warmup)
    save()
    result["layers"] = layer_rows(args.reps, args.warmup, ("float32",) if args.quick else ("float32", "float16"))
    save()
    for dtype in dtypes:
        result["grid"] += grid_rows(hs, bs, (dtype,), args.reps, args.warmup)
        save()
    if not args.quick:
        result["ablation"] += ablation_rows(args.reps, args.warmup, dtype="float16")
    from ecornn import gpu_blas
    result["cublas"] = gpu_blas.workspace_status()
    result["seconds"] = time.time() - started
    print(_write(args, result))
    print(f"benchmark took {result['seconds']:.0f} s; cuBLAS {result['cublas']}")


def _write_mma(args, result):
    import os
    env = result["environment"]
    text = (f"# fused v3 (mma step) benchmark ({env['device']})\n\n" + json.dumps(env)
            + "\n\n" + mma_markdown(result["mma"]))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{args.tag}.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    with open(os.path.join(args.out, f"{args.tag}.md"), "w") as fh:
        fh.write(text + "\n")
    return text


def _write(args, result, extra=None):
    import os
    env = result["environment"]
    text = "\n\n".join([f"# fused benchmark ({env['device']})\n\n" + json.dumps(env),
                        "## Grid\n\n" + grid_markdown(result["grid"]),
                        "## Layers / directions\n\n" + layers_markdown(result["layers"]),
                        "## Ablation\n\n" + ablation_markdown(result["ablation"])]
                       + ([extra] if extra else []))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{args.tag}.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    with open(os.path.join(args.out, f"{args.tag}.md"), "w") as fh:
        fh.write(text + "\n")
    return text


if __name__ == "__main__":
    main()
