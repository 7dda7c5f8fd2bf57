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


# Problems timed for calibration (hidden, batch, dtype): seconds in all, spread enough to pin the terms.
PERSISTENT_GRID = [(256, 1, "float32"), (256, 8, "float32"), (1024, 1, "float32"), (1024, 8, "float32"),
                   (512, 4, "float32")]
FUSED_GRID = [(256, 16, "float32"), (256, 128, "float32"), (1024, 16, "float32"), (1024, 128, "float32"),
              (512, 64, "float32"), (512, 16, "bfloat16"), (1024, 128, "bfloat16"), (2048, 64, "bfloat16")]
# Fitted in this order (later stages see earlier results): strategy, dtypes, two constants' ranges.
SEARCH = [
    ("fused", ("float32",), {"launch_us": np.linspace(0.5, 8.0, 31),
                             "gemm_efficiency": np.geomspace(0.05, 1.0, 40)}),
    ("fused", ("float16", "bfloat16"), {"gemm_efficiency_16bit": np.geomspace(0.01, 1.0, 60)}),
    ("persistent", ("float32", "float16", "bfloat16"),
     {"persistent_exchange_us": np.linspace(0.0, 4.0, 41), "persistent_efficiency": np.geomspace(0.02, 1.0, 40)}),
]


def _predict(strategy, config, device, consts):
    from .planner import persistent_fit
    if strategy == "persistent":
        return costmodel.predict_persistent_us(config, device, persistent_fit(config, device)["blocks"],
                                               False, consts)
    return costmodel.predict_fused_us(config, device, False, consts)


def fit_constants(measurements: list, device, start: costmodel.CostConstants = costmodel.DEFAULTS):
    """Grid-search each stage's constants to minimise squared log error over its points."""
    import itertools
    consts = start
    for strategy, dtypes, space in SEARCH:
        points = [(_cfg(m), m["us_per_step"]) for m in measurements
                  if m["strategy"] == strategy and m["dtype"] in dtypes and m["us_per_step"]]
        if not points:
            continue
        best = None
        for values in itertools.product(*space.values()):
            trial = dataclasses.replace(consts, **{k: float(v) for k, v in zip(space, values)})
            err = sum((np.log(_predict(strategy, c, device, trial)) - np.log(us)) ** 2 for c, us in points)
            if best is None or err < best[0]:
                best = (err, trial)
        consts = best[1]
    return consts


def measure(time_config, xp, seq_len=256, iterations=10) -> list:
    from .config import LSTMConfig
    from .errors import NotSupported
    out = []
    for strategy, grid in (("persistent", PERSISTENT_GRID), ("fused", FUSED_GRID)):
        for hidden, batch, dtype in grid:
            config = LSTMConfig(hidden, hidden, batch=batch, seq_len=seq_len, dtype=dtype)
            try:
                us = time_config(config, strategy, iterations, False, xp=xp, progress=False)["us_per_step"]
            except NotSupported:
                us = None
            out.append({"strategy": strategy, "hidden": hidden, "batch": batch, "dtype": dtype,
                        "seq_len": seq_len, "us_per_step": us})
    return out


def main(argv=None) -> int:
    import argparse
    from .arrays import cupy_or_none, gpu_available
    from .devices import current
    from .run import time_config
    parser = argparse.ArgumentParser(prog="python -m ecornn.run calibrate", description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args(argv)
    if not gpu_available():
        print("error: calibration needs a CUDA GPU; without one the planner uses the reference", flush=True)
        return 2
    device = current()
    measurements = measure(time_config, cupy_or_none(), iterations=args.iterations)
    consts = fit_constants(measurements, device)
    path = costmodel.save_constants(device.name, versions(), consts, measurements)
    for m in measurements:
        print(f"{m['strategy']:>10} H={m['hidden']:<5} B={m['batch']:<4} measured "
              f"{m['us_per_step'] or float('nan'):7.2f} us/step, model {_predict(m['strategy'], _cfg(m), device, consts):7.2f}")
    print(f"constants: {consts.to_json()}\nwrote {path}")
    return 0


def _cfg(m):
    from .config import LSTMConfig
    return LSTMConfig(m["hidden"], m["hidden"], dtype=m["dtype"], batch=m["batch"], seq_len=m["seq_len"])
