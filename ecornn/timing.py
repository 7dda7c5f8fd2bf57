"""Timing helpers shared by the runner, the sweep and calibration (median of repeated runs)."""
from __future__ import annotations

import time

import numpy as np


def median_seconds(fn, iterations: int, xp=np, warmup: int = 2, on_iteration=None) -> float:
    """Median duration of ``fn()``; GPU work is bracketed by CUDA events on the current stream."""
    for _ in range(warmup):
        fn()
    times = []
    if xp is np:
        for _ in range(iterations):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
            if on_iteration:
                on_iteration()
        return float(np.median(times))
    for _ in range(iterations):
        start, stop = xp.cuda.Event(), xp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(xp.cuda.get_elapsed_time(start, stop) / 1e3)
        if on_iteration:
            on_iteration()
    return float(np.median(times))
