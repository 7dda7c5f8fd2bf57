"""Exploration (v15/v16): the persistent forward's kernel alone with extra compile-time constants
over the plan's own, e.g. POLL_DELAY_NS (v16: the sleep before a warp's first poll of the tagged
exchange; the plan's default is rules.poll_delay_pays'), with the in-kernel projection off and on.
The sessions' runs (results/persistent_v15: 3_, 4_, 7_, 8_) also timed constants that were removed
after them (POLL_BACKOFF_NS, X_LOAD_AFTER_PRODUCT, X_SKIP_LOADS: commits a0d4c67 to 7ca63ec; WARP0_NO_INPUT
was never committed; see the notes). Per cell: median kernel µs/step (T=256, CUDA events).

    python benchmarks/explore_grid_polling.py OUT_DIR [--repeats N] [--settings JSON] [--cells JSON] [--name NAME]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import STEPS, _median_ms, _problem, bench_meta, kernel_launcher  # noqa: E402

import ecornn.gpu as gpu  # noqa: E402
from ecornn.engines import persistent  # noqa: E402

CELLS = [(512, 4), (512, 1), (512, 2), (1024, 1), ("float16", 1024, 1)]   # (hidden, batch): fp32
SETTINGS = [{}, {"POLL_DELAY_NS": 100}, {"POLL_DELAY_NS": 250}, {"POLL_DELAY_NS": 500}]
_extra: dict = {}
_compile = gpu.compile_module


def _compile_with_extra(file, defines=None, *args, **kwargs):
    return _compile(file, {**(defines or {}), **_extra}, *args, **kwargs)


def kernel_us(dtype, hidden, batch, projection, setting, repeats):
    _extra.clear()
    _extra.update(setting)
    persistent._kernel = persistent._remembered(persistent._kernel.__wrapped__)   # builds per setting
    ab_modes.set_engine_flags({"IN_KERNEL_PROJECTION": projection})
    try:
        config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
        plan = persistent.plans_for(config, True)["forward"]
        prepared = persistent.prepare(config, weights)
        launch = kernel_launcher(config, prepared, x, h0, c0, plan)
        return _median_ms(launch, repeats) * 1e3 / STEPS, persistent._final(plan).in_kernel_projection
    finally:
        ab_modes.set_engine_flags({})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--settings", type=json.loads, default=SETTINGS, help="JSON list of define dicts")
    parser.add_argument("--cells", type=json.loads, default=CELLS, help="JSON list of [hidden, batch]")
    parser.add_argument("--name", default="explore_grid_polling")
    args = parser.parse_args()
    gpu.compile_module = _compile_with_extra
    rows = []
    for cell in args.cells:
        dtype, hidden, batch = cell if len(cell) == 3 else ["float32", *cell]
        for setting in args.settings:
            for projection in (False, True):
                us, fits = kernel_us(dtype, hidden, batch, projection, setting, args.repeats)
                rows.append({"dtype": dtype, "hidden": hidden, "batch": batch, "setting": setting, "projection": fits,
                             "kernel_us": us})
                print(f"{dtype} H={hidden} B={batch} {setting} projection={fits}: {us:.2f} us/step", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.name}.json").write_text(json.dumps({"meta": bench_meta(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
