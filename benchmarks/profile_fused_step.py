"""Profile and time the fused v3 mma step (kernels/fused_step_mma.cu, `fused_step_fwd`).

Two modes:

  time (default)   graph ON, T=256 (as the benchmark tables): µs/step of the forward for each
                   config, with the tile fused_mma.choose_tile picks and with alternative forward
                   tiles (--variants), epilogue off (cuBLAS + pointwise) as the reference, and
                   fwd+bwd for the chosen tile. Random non-zero inputs, CUDA events, median of --reps.
                   Every variant's y is compared with the epilogue-off y (max relative error), so a
                   tile the GPU tests do not cover is still checked.
  ncu              graph OFF, a short sequence (--steps, default 32), ONE config (--config), one
                   forward after one warm-up forward: the kernel launches that Nsight Compute
                   filters with --kernel-name regex:fused_step_fwd --launch-skip 5 --launch-count 3.

    python benchmarks/profile_fused_step.py                       # timings, default configs
    python benchmarks/profile_fused_step.py --configs 256x128 --variants "4,2,8,2 4,2,4,1"
    ncu --kernel-name regex:fused_step_fwd --launch-skip 5 --launch-count 3 --section SpeedOfLight \\
        python benchmarks/profile_fused_step.py --mode ncu --config 256x128

Configs are HxB (fp16 unless --dtype); a variant is "m_tiles,n_tiles,warps,m_warps" of the forward
tile (fused_mma.Tile; rows = 16 m_tiles, units = 2 n_tiles, warps = m_warps row groups x K-slices).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager

import numpy as np

DEFAULT_CONFIGS = ("256x128", "256x16", "1024x16")

# Alternative forward tiles timed next to the chosen one (m_tiles, n_tiles, warps, m_warps).
DEFAULT_VARIANTS = {
    "256x128": ["4,2,4,1",     # v3: 64 rows x 4 units, 4 warps splitting K (2 load rounds a warp)
                "4,2,8,2",     # v3.1 choice: 2 row groups x 4 K-slices, one round a warp
                "4,2,16,4",    # 4 row groups x 4 K-slices (1 m-tile a warp)
                "4,2,16,2",    # 2 row groups x 8 K-slices (2 k-steps a warp)
                "2,2,4,1",     # 32 rows: 256 blocks of 4 warps (2 per SM)
                "2,2,8,2",     # 32 rows, 2 row groups x 4 K-slices
                "2,4,8,2"],    # 32 rows x 8 units: 128 blocks, 4 MB of L2 reads a step instead of 5
    "256x64": ["2,2,4,1", "2,2,8,2", "2,2,8,1", "4,2,8,2"],
    "256x16": ["1,2,4,1", "1,2,8,1", "1,2,2,1",
               "1,1,4,1"],     # 2 units a block: 128 blocks instead of 64 (not a chooser option)
    "512x64": ["4,2,8,1", "4,2,16,2", "2,2,8,1"],
    "1024x16": ["1,4,16,1", "1,2,16,1", "1,4,8,1"],
}


def parse_config(text):
    h, b = (int(v) for v in text.lower().split("x"))
    return h, b


def parse_tile(text):
    from ecornn.engines.fused_mma import Tile
    m, n, w, mw = (int(v) for v in text.split(","))
    return Tile(m, n, w, False, mw)


def make_config(h, b, steps, dtype):
    from ecornn import LSTMConfig
    return LSTMConfig(input_size=h, hidden_size=h, batch=b, seq_len=steps, dtype=dtype)


def make_problem(cfg, seed=0):
    """Weights, x, h0, c0, dy on the GPU (standard normal, never zeros)."""
    import cupy

    from ecornn.engines import fused
    from ecornn.weights import LayerWeights, init_weights, to_dtype
    rng = np.random.default_rng(seed)

    def gpu(shape):
        host = to_dtype(rng.standard_normal(shape, dtype=np.float32), cfg.dtype)
        if cfg.dtype == "bfloat16" and fused.bf16_array_dtype() is None:
            host = host.view(np.uint16)
        return cupy.asarray(host)

    weights = [LayerWeights(*(gpu(a.shape) for a in w)) for w in init_weights(cfg, seed=seed + 1)]
    x = gpu((cfg.seq_len, cfg.batch, cfg.input_size))
    h0, c0 = gpu(cfg.state_shape), gpu(cfg.state_shape)
    dy = gpu((cfg.seq_len, cfg.batch, cfg.num_directions * cfg.hidden_size))
    return weights, x, h0, c0, dy


@contextmanager
def forward_tile(tile):
    """Force the forward tile (None: fused_mma.choose_tile's own); backward tiles unchanged."""
    from ecornn.engines import fused, fused_mma
    real = fused_mma.choose_tile
    if tile is not None:
        def forced(batch, hidden, backward, *args, **kwargs):
            return real(batch, hidden, backward, *args, **kwargs) if backward else tile
        fused_mma.choose_tile = forced
    fused.clear_cache()
    try:
        yield
    finally:
        fused_mma.choose_tile = real
        fused.clear_cache()


def median_us_per_step(fn, cfg, reps, warmup):
    import cupy
    from ecornn.timing import median_seconds
    return 1e6 * median_seconds(fn, reps, xp=cupy, warmup=warmup) / cfg.seq_len


def _host64(a, dtype):
    from ecornn.engines import fused
    a = fused.raw(a).get()
    if dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype == "float16" and a.dtype == np.uint16:   # raw 16-bit words: decode, do not convert
        return a.view(np.float16).astype(np.float64)
    return a.astype(np.float64)


def _max_rel(y, y_ref):
    return float(np.max(np.abs(y - y_ref)) / max(np.max(np.abs(y_ref)), 1e-30))


def time_config(h, b, args):
    """Rows of one config: epilogue off, the chosen tile (fwd and fwd+bwd), each variant."""
    from ecornn.engines import fused
    cfg = make_config(h, b, args.steps, args.dtype)
    weights, x, h0, c0, dy = make_problem(cfg)
    rows = []

    def run(label, tile=None, train=False, **flags):
        with forward_tile(tile), fused.using(**flags):
            prepared = fused.prepare(cfg, weights)

            def fwd():
                return fused.forward(cfg, x, weights, h0, c0, prepared=prepared)

            def fwd_bwd():
                _, _, _, res = fused.forward(cfg, x, weights, h0, c0, training=True, prepared=prepared)
                fused.backward(res, dy, h0, c0)

            y = _host64(fwd()[0], cfg.dtype)
            row = {"H": h, "B": b, "dtype": cfg.dtype, "variant": label,
                   "step_kernel": fused.last_step_kernel,
                   "fwd_us": median_us_per_step(fwd, cfg, args.reps, args.warmup)}
            if train:
                row["fwd_bwd_us"] = median_us_per_step(fwd_bwd, cfg, args.reps, args.warmup)
        return row, y

    ref_row, y_ref = run("epilogue off", epilogue=False)
    rows.append(ref_row)
    chosen_row, y = run("chosen", train=not args.no_train)
    chosen_row["max_rel_err_vs_off"] = _max_rel(y, y_ref)
    rows.append(chosen_row)
    for text in args.variants.get(f"{h}x{b}", []):
        tile = parse_tile(text)
        try:
            row, y = run(f"fwd tile {text}", tile)
        except Exception as exc:  # e.g. shared memory over the limit: report, go on
            rows.append({"H": h, "B": b, "dtype": cfg.dtype, "variant": f"fwd tile {text}",
                         "error": f"{type(exc).__name__}: {str(exc)[:120]}"})
            continue
        row["max_rel_err_vs_off"] = _max_rel(y, y_ref)
        rows.append(row)
    return rows


def line(row):
    if "error" in row:
        return f"{row['dtype']:>8} H={row['H']:<5} B={row['B']:<4} {row['variant']:<18} ERROR {row['error']}"
    text = f"{row['dtype']:>8} H={row['H']:<5} B={row['B']:<4} {row['variant']:<18} fwd {row['fwd_us']:6.2f} us/step"
    if "fwd_bwd_us" in row:
        text += f"  fwd+bwd {row['fwd_bwd_us']:6.2f}"
    if "max_rel_err_vs_off" in row:
        text += f"  rel err vs off {row['max_rel_err_vs_off']:.1e}"
    return text + f"  [{row['step_kernel']}]"


def mode_time(args):
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    print(f"# {name}, T={args.steps}, graph ON, median of {args.reps} after {args.warmup} warm-up, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    result = {"device": name, "steps": args.steps, "rows": []}
    for text in args.configs:
        h, b = parse_config(text)
        for row in time_config(h, b, args):
            print(line(row), flush=True)
            result["rows"].append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


def mode_ncu(args):
    """Graph off: every step is one Python-issued fused_step_fwd launch (ncu profiles them)."""
    import cupy

    from ecornn.engines import fused
    h, b = parse_config(args.config)
    cfg = make_config(h, b, args.steps, args.dtype)
    weights, x, h0, c0, _ = make_problem(cfg)
    tile = parse_tile(args.tile) if args.tile else None
    with forward_tile(tile), fused.using(graph=False):
        prepared = fused.prepare(cfg, weights)
        for _ in range(2):  # the first launches also compile; ncu skips --launch-skip of them
            fused.forward(cfg, x, weights, h0, c0, prepared=prepared)
        cupy.cuda.Device().synchronize()
        print(f"ncu mode: {args.dtype} H={h} B={b} T={args.steps}: {fused.last_step_kernel}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=("time", "ncu"), default="time")
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), help="time: HxB list")
    parser.add_argument("--config", default="256x128", help="ncu: one HxB")
    parser.add_argument("--tile", default=None, help="ncu: forward tile m,n,warps,m_warps (default: chosen)")
    parser.add_argument("--variants", default=None,
                        help='time: forward tiles to time per config, "HxB:m,n,w,mw m,n,w,mw;HxB:..." '
                             '(default: a built-in list; "none" for none)')
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--steps", type=int, default=None, help="T (time: 256, ncu: 32)")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--no-train", action="store_true", help="time: skip fwd+bwd of the chosen tile")
    parser.add_argument("--json", default=None, help="time: write the rows here")
    args = parser.parse_args(argv)
    args.configs = [c for c in args.configs.split(",") if c]
    if args.variants is None:
        args.variants = DEFAULT_VARIANTS
    elif args.variants == "none":
        args.variants = {}
    else:
        args.variants = {k: v.split() for k, v in (p.split(":") for p in args.variants.split(";") if p)}
    if args.steps is None:
        args.steps = 256 if args.mode == "time" else 32
    (mode_time if args.mode == "time" else mode_ncu)(args)


if __name__ == "__main__":
    sys.exit(main())
