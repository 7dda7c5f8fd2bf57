"""Calibrate the cost model's constants on the current GPU: ``python -m ecornn.run calibrate``.

Times a small grid of problems with each GPU strategy, fits the constants of the cost model's
physical terms by least squares, and writes a cache keyed by device name and versions.
"""
from __future__ import annotations

import dataclasses
import platform

import numpy as np

from . import __version__, costmodel


def versions() -> dict:
    out = {"ecornn": __version__, "python": platform.python_version()}
    from .arrays import cupy_or_none
    cupy = cupy_or_none()
    if cupy is not None:
        out["cupy"] = cupy.__version__
        try:
            out["cuda_runtime"] = str(cupy.cuda.runtime.runtimeGetVersion())
        except Exception:
            pass
    return out


# Problems timed by `calibrate` (hidden, batch, dtype, training): seconds in all, spread enough to
# pin every term. A sweep's JSON can be used instead (`calibrate --from-sweep sweep.json`).
PERSISTENT_GRID = [(256, 1, "float32", False), (256, 16, "float32", False), (1024, 1, "float32", False),
                   (1024, 16, "float32", False), (512, 4, "float32", False), (512, 16, "float32", False),
                   (256, 8, "float32", False), (1536, 8, "float32", False),    # fp32 FFMA, and with the
                   (1024, 4, "float32", False), (512, 8, "float32", False),    # two above the fp32 split
                   (512, 4, "float32", True), (1024, 1, "float32", True), (1024, 8, "float32", True),
                   (1024, 4, "bfloat16", False), (2048, 4, "bfloat16", False), (512, 16, "bfloat16", False),
                   (1024, 4, "bfloat16", True)]
FUSED_GRID = [(256, 16, "float32", False), (256, 128, "float32", False), (1024, 16, "float32", False),
              (1024, 128, "float32", False), (512, 64, "float32", False), (512, 16, "bfloat16", False),
              (1024, 128, "bfloat16", False), (2048, 64, "bfloat16", False), (512, 64, "float32", True),
              (1024, 16, "bfloat16", True), (256, 64, "bfloat16", False), (1024, 16, "bfloat16", False)]
SIXTEEN = ("float16", "bfloat16")
ALL = ("float32",) + SIXTEEN
# Grid-searched stages, in order (later stages see earlier results): strategy, dtypes, training, ranges.
SEARCH = [
    ("fused", ("float32",), False, {"launch_us": np.linspace(0.5, 8.0, 16),
                                    "gemm_efficiency": np.geomspace(0.05, 1.0, 20),
                                    "fused_fp32_batch_us": np.concatenate([[0.0], np.geomspace(0.01, 2.0, 19)])}),
    ("fused", SIXTEEN, False, {"gemm_efficiency_16bit": np.geomspace(0.01, 1.0, 60)}),
    ("fused", SIXTEEN, False, {"fused_mma_step_us": np.linspace(1.0, 8.0, 29),
                               "fused_mma_us_per_gflop": np.concatenate([[0.0], np.geomspace(1.0, 100.0, 21)])}),
    ("fused", ALL, True, {"fused_backward_factor": np.linspace(0.3, 4.0, 75)}),
    ("persistent", ALL, True, {"backward_step_us": np.linspace(0.0, 6.0, 25),
                               "backward_flop_factor": np.linspace(0.5, 10.0, 39)}),
    ("persistent", SIXTEEN, True, {"mma_bwd_step_us": np.linspace(0.0, 6.0, 31),
                                   "mma_bwd_us_per_kclock": np.linspace(0.0, 6.0, 31)}),
]


def _predict(strategy, config, device, consts, training=False):
    from .planner import persistent_fit
    if strategy == "persistent":
        return costmodel.predict_persistent_us(config, device, persistent_fit(config, device, training),
                                               training, consts)
    return costmodel.predict_fused_us(config, device, training, consts)


def _points(measurements, strategy, dtypes, training):
    return [(_cfg(m), m["us_per_step"]) for m in measurements
            if m["strategy"] == strategy and m["dtype"] in dtypes and bool(m.get("training")) == training
            and m["us_per_step"]]


def _grid_search(consts, strategy, points, space, device, training):
    import itertools
    best = None
    for values in itertools.product(*space.values()):
        trial = dataclasses.replace(consts, **{k: float(v) for k, v in zip(space, values)})
        err = sum((np.log(_predict(strategy, c, device, trial, training)) - np.log(us)) ** 2 for c, us in points)
        if best is None or err < best[0]:
            best = (err, trial)
    return best[1]


def _fit_persistent_inference_all(consts, measurements, device):
    """Persistent inference constants: the tensor-core kernel's and the fp32 kernels' separately."""
    from .planner import persistent_fit
    points = _points(measurements, "persistent", ALL, False)
    kinds = [_kernel_family(persistent_fit(c, device, False)) for c, _ in points]
    for family, fit in (("mma", _fit_mma_inference), ("split", _fit_split_inference),
                        ("split_cluster", _fit_split_cluster_inference), ("fp32", _fit_persistent_inference)):
        chosen = [p for p, kind in zip(points, kinds) if kind == family]
        if chosen:
            consts = fit(consts, chosen, device)
    return consts


def _kernel_family(kernel: dict) -> str:
    """Which constants predict a persistent kernel: 16-bit tensor cores, the fp32 split, fp32 FFMA."""
    if kernel.get("split_mma"):   # v43: the split on thread-block clusters has its own constants
        return "split_cluster" if kernel.get("split_clusters", 1) > 1 else "split"
    return "mma" if kernel.get("mma") else "fp32"


def _fit_persistent_inference(consts, points, device):
    """The inference step is linear in its unknowns: solve relative least squares for (grid fixed µs with
    grid.sync, grid fixed µs with the tagged exchange (v50), cluster fixed µs, 1/efficiency, µs per 1e3 H*B,
    µs per 1e5 H*B^2). v50: from fewer points than unknowns (a sweep's few B=1 cells) the fixed terms alone, the
    slopes as they are (a minimum-norm solution clipped to the bounds below missed the points it was fitted on)."""
    from .planner import persistent_fit
    free_slopes = len(points) >= 6
    zeroed = dict(grid_sync_us=0.0, persistent_exchange_us=0.0, grid_tagged_step_us=0.0, cluster_step_us=0.0)
    if free_slopes:
        zeroed.update(persistent_efficiency=1e30, persistent_vector_us=0.0, persistent_batch2_us=0.0)
    rows, targets = [], []
    for config, us in points:
        kernel = persistent_fit(config, device, False)
        cluster = kernel.get("cluster_blocks")
        tagged = cluster is None and bool(kernel.get("grid_tagged"))
        flop_us, hb, hbb = costmodel.persistent_step_terms(config, device, cluster or kernel["blocks"])
        rest = costmodel.predict_persistent_us(config, device, kernel, False, dataclasses.replace(consts, **zeroed))
        layers = config.num_layers
        rows.append([layers * (cluster is None and not tagged), layers * tagged, layers * (cluster is not None)]
                    + ([layers * flop_us, layers * hb, layers * hbb] if free_slopes else [0.0, 0.0, 0.0]))
        targets.append(us - rest)
    a = np.array(rows) / np.array([us for _, us in points])[:, None]
    b = np.array(targets) / np.array([us for _, us in points])
    used = a.any(axis=0)
    theta = np.zeros(6)
    theta[used] = np.linalg.lstsq(a[:, used], b, rcond=None)[0]
    theta = np.maximum(theta, [consts.grid_sync_us, 0.05, 0.05, 1.0, 0.0, 0.0])  # physical lower bounds
    fitted = dict(persistent_exchange_us=theta[0] - consts.grid_sync_us, grid_tagged_step_us=theta[1],
                  cluster_step_us=theta[2], persistent_efficiency=1.0 / theta[3], persistent_vector_us=theta[4],
                  persistent_batch2_us=theta[5])
    return dataclasses.replace(consts, **{name: float(value) for (name, value), use in zip(fitted.items(), used)
                                          if use})


def _fit_mma_inference(consts, points, device):
    """Relative least squares for the tensor-core kernel's (fixed µs, µs per 1e3 H*B, µs per 1e6 H^2)."""
    return _fit_linear_step(consts, points, device, ("mma_step_us", "mma_vector_us", "mma_weights_us"),
                            lambda config, kernel: costmodel.mma_forward_terms(config, kernel.get("mma_groups", 1),
                                                                               costmodel.mma_products(kernel)))


def _split_terms(config, kernel) -> tuple:
    return costmodel.split_step_terms(config, kernel["split_mma"], kernel.get("split_groups", 1))


def _fit_split_inference(consts, points, device):
    """The same for the fp32 split's (fixed µs, µs per 1e3 H*B, µs per 1e6 H^2 per mma of a tile)."""
    return _fit_linear_step(consts, points, device, ("split_step_us", "split_vector_us", "split_mma_us"), _split_terms)


def _fit_split_cluster_inference(consts, points, device):
    """v43: the same for the split on thread-block clusters."""
    return _fit_linear_step(consts, points, device,
                            ("split_cluster_step_us", "split_cluster_vector_us", "split_cluster_mma_us"), _split_terms)


def _fit_linear_step(consts, points, device, names, terms):
    """Relative least squares for a step of names[0] + names[1] * terms[0] + names[2] * terms[1] per
    layer (terms(config, kernel)), after what the other constants predict; v43: as they are from fewer points than
    unknowns (a sweep with one clustered split)."""
    from .planner import persistent_fit
    if len(points) < len(names):
        return consts
    rows, targets = [], []
    for config, us in points:
        kernel = persistent_fit(config, device, False)
        rest = costmodel.predict_persistent_us(config, device, kernel, False,
                                               dataclasses.replace(consts, **dict.fromkeys(names, 0.0)))
        rows.append([config.num_layers] + [config.num_layers * t for t in terms(config, kernel)])
        targets.append(us - rest)
    scale = np.array([us for _, us in points])
    theta = np.linalg.lstsq(np.array(rows) / scale[:, None], np.array(targets) / scale, rcond=None)[0]
    theta = np.maximum(theta, [0.5, 0.0, 0.0])  # at least a barrier; no negative slopes
    return dataclasses.replace(consts, **{n: float(t) for n, t in zip(names, theta)})


def fit_constants(measurements: list, device, start: costmodel.CostConstants = costmodel.DEFAULTS):
    """Fit the cost model's constants to measured µs/step (dicts with strategy, hidden, batch,
    dtype, seq_len, training, us_per_step)."""
    consts, inference_fitted = start, False
    for strategy, dtypes, training, space in SEARCH:
        if strategy == "persistent" and not inference_fitted:  # linear inference terms first (once;
            consts = _fit_persistent_inference_all(consts, measurements, device)  # they use the
            inference_fitted = True                                # fused stages' GEMM efficiencies)
        points = _points(measurements, strategy, dtypes, training)
        if points:
            consts = _grid_search(consts, strategy, points, space, device, training)
    return consts


def measurements_from_sweep(path) -> list:
    import json
    data = json.load(open(path))
    out = []
    for cell in data["cells"]:
        for strategy in ("persistent", "fused"):
            us = cell.get(f"{strategy}_us")
            if us:
                out.append({"strategy": strategy, "hidden": cell["hidden"], "batch": cell["batch"],
                            "dtype": cell["dtype"], "seq_len": data["meta"].get("seq_len", 256),
                            "training": cell["mode"] == "training", "us_per_step": us})
    return out


def measure(time_config, xp, seq_len=256, iterations=10) -> list:
    from .config import LSTMConfig
    from .errors import NotSupported
    out = []
    for strategy, grid in (("persistent", PERSISTENT_GRID), ("fused", FUSED_GRID)):
        for hidden, batch, dtype, training in grid:
            config = LSTMConfig(hidden, hidden, batch=batch, seq_len=seq_len, dtype=dtype)
            try:
                us = time_config(config, strategy, iterations, training, xp=xp, progress=False)["us_per_step"]
            except NotSupported:
                us = None
            out.append({"strategy": strategy, "hidden": hidden, "batch": batch, "dtype": dtype,
                        "seq_len": seq_len, "training": training, "us_per_step": us})
    return out


def main(argv=None) -> int:
    import argparse
    from .arrays import cupy_or_none, gpu_available
    from .devices import KNOWN, current
    from .run import time_config
    parser = argparse.ArgumentParser(prog="python -m ecornn.run calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--from-sweep", metavar="JSON", help="fit to a sweep's measurements instead of timing")
    parser.add_argument("--device", choices=sorted(KNOWN), help="with --from-sweep on a machine without "
                        "that GPU: the device the sweep ran on")
    args = parser.parse_args(argv)
    if args.from_sweep:
        device = KNOWN[args.device] if args.device else current()
        measurements = measurements_from_sweep(args.from_sweep)
    elif gpu_available():
        device = current()
        measurements = measure(time_config, cupy_or_none(), iterations=args.iterations)
    else:
        print("error: calibration needs a CUDA GPU (or --from-sweep JSON --device NAME)", flush=True)
        return 2
    if device is None:
        print("error: no GPU here: name the sweep's device with --device", flush=True)
        return 2
    consts = fit_constants(measurements, device)
    path = costmodel.save_constants(device.name, versions(), consts, measurements)
    for m in measurements:
        model = _predict(m["strategy"], _cfg(m), device, consts, bool(m.get("training")))
        print(f"{m['strategy']:>10} {m['dtype']:>8} {'train' if m.get('training') else 'infer'} "
              f"H={m['hidden']:<5} B={m['batch']:<4} measured {m['us_per_step'] or float('nan'):8.2f} "
              f"us/step, model {model:8.2f}")
    print(f"constants: {consts.to_json()}\nwrote {path}")
    return 0


def _cfg(m):
    from .config import LSTMConfig
    return LSTMConfig(m["hidden"], m["hidden"], dtype=m["dtype"], batch=m["batch"], seq_len=m["seq_len"])
