"""One configuration timed under several engine-flag settings ("modes") in one process: the A/B
benches of persistent v12-v14 (bench_persistent_v12.py, _v13.py, _v14.py). Per mode: the forward
plan, the forward kernel alone, the whole forward (graph replay) and, where asked, fwd+bwd."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _median_ms, kernel_launcher  # noqa: E402
from bench_persistent_v5 import _train_ms  # noqa: E402

from ecornn import gpu_blas  # noqa: E402
from ecornn.engines import batch_pad, persistent, persistent_graph  # noqa: E402
from ecornn.engines import persistent_capacity as capacity  # noqa: E402

ENGINE_FLAGS = ("FP32_TENSOR_CORES", "TAGGED_EXCHANGE", "PAIRED_SPLIT", "SPLIT_WORDS", "IN_KERNEL_PROJECTION", "POLL_DELAY",
                "REGISTER_MODEL", "FP32_GEMMS", "FP32_BACKWARD_GEMMS", "KERNEL_WRITES_16BIT", "GRID_KERNEL_BIAS",
                "X_PREFETCH", "FAST_FP32_GATES", "MIN_3XTF32_FLOPS", "MIN_3XTF32_BACKWARD_FLOPS", "TAGGED_WITH_WAIT",
                "CLUSTER_DEFAULT", "BATCH_GROUPS", "GROUP_BARRIERS", "BACKWARD_16BIT_GRADS", "BACKWARD_16BIT_DY",
                "BWD_LATE_LOADS", "DEINTERLEAVE_BY_MEMCPY", "XW_UNSCALE_IN_KERNEL", "XW_AT_LOAD", "H0_IN_PRODUCT",
                "SPLIT_READS_X", "POLL_SPIN_CYCLES", "FP32_LONG_REDUCTION_FROM_K",
                "FP32_PROJECTION_LONG_FROM_K", "LONG_REDUCTIONS", "LONG_REDUCTION_CHUNK", "BACKWARD_GROUPS",
                "BACKWARD_BY_ROWS", "CLUSTER_K", "CLUSTER_WARPS", "CLUSTER_POLL_DELAY_NS", "CLUSTER_COOPERATIVE",
                "BATCH_PADDING", "PAD_READS_X", "CUT_AT_COPY_OUT", "INPUT_PART_K_TILES",
                "INPUT_REG_K_TILES", "FORWARD_WARPS", "DIAG_IN_K_TILES_USED", "DIAG_X_STAGE_EVERY", "POLL_BACKOFF_NS",
                "H0_WIDE_LOADS", "FINE_BACKOFF_BYTES", "DIAG_SPILL_BYTES_ACCEPTED")
BLAS_FLAGS = ("UNSCALE_BY_FOURS", "SPLIT_BY_WARPS")   # gpu_blas's (v35, v48)
PAD_FLAGS = ("PAD_BY_KERNEL",)   # v48: batch_pad's
GRAPH_FLAGS = ("OUTPUTS_IN_PLACE", "FRONT_BRANCH", "LOOKUP_MEMO")   # v56, v59, v61: persistent_graph's flags
CAPACITY_FLAGS = ("BATCH_GROUP_MIN",)   # v46: the capacity model's (the cached plans are dropped when one changes)
# The engine's own defaults, read once at import (before any mode sets a flag), so that a changed
# default in persistent.py needs no second edit here.
ENGINE_FLAG_DEFAULTS = {name: getattr(persistent, name) for name in ENGINE_FLAGS}
ENGINE_FLAG_DEFAULTS.update({name: getattr(gpu_blas, name) for name in BLAS_FLAGS})
ENGINE_FLAG_DEFAULTS.update({name: getattr(capacity, name) for name in CAPACITY_FLAGS})
ENGINE_FLAG_DEFAULTS.update({name: getattr(batch_pad, name) for name in PAD_FLAGS})
ENGINE_FLAG_DEFAULTS.update({name: getattr(persistent_graph, name) for name in GRAPH_FLAGS})


def set_engine_flags(flags: dict) -> None:
    """The engine's flags at their defaults, except ``flags``. A name that is no engine flag (e.g. a removed
    experiment's) is refused: set on the module it would be ignored, and its modes would time the same code."""
    unknown = sorted(set(flags) - set(ENGINE_FLAG_DEFAULTS))
    if unknown:
        raise ValueError(f"engine flags: expected names from ab_modes' flag lists, got unknown {unknown}")
    for name, value in {**ENGINE_FLAG_DEFAULTS, **flags}.items():
        if name in CAPACITY_FLAGS:
            if getattr(capacity, name) != value:
                setattr(capacity, name, value)
                persistent._plans_for.cache_clear()
        else:
            module = (gpu_blas if name in BLAS_FLAGS else batch_pad if name in PAD_FLAGS
                      else persistent_graph if name in GRAPH_FLAGS else persistent)
            setattr(module, name, value)


def plannable_modes(config, modes: dict, train: bool, built: bool = False) -> tuple:
    """({mode: flags} of the modes whose flags plan ``config`` (``built``: and whose forward builds: v42's clusters
    that do not co-reside), {mode: error} of the others): such a mode is recorded, not timed. The flags are back at
    their defaults after each."""
    usable, errors = {}, {}
    for mode, flags in modes.items():
        set_engine_flags(flags)
        try:
            plans = persistent.plans_for(config, train)
            if built:
                persistent._final(plans["forward"])
            usable[mode] = flags
        except Exception as exc:   # noqa: BLE001 - recorded per mode
            errors[mode] = f"{type(exc).__name__}: {str(exc)[:160]}"
        finally:
            set_engine_flags({})
    return usable, errors


def alternate_rounds(modes: dict, rounds: int, measure) -> dict:
    """{mode: {key: [value per kept round]}}: ``measure()`` (a dict) under each mode's flags, the
    modes' order reversed every round, after a warm-up round that is not kept (v23: the first mode
    timed in a process measured slower). The flags are back at their defaults after each call."""
    out = {mode: {} for mode in modes}
    for r in range(rounds + 1):
        for mode in (modes if r % 2 == 0 else reversed(list(modes))):
            set_engine_flags(modes[mode])
            try:
                values = measure()
            finally:
                set_engine_flags({})
            for key, value in values.items() if r else ():
                out[mode].setdefault(key, []).append(value)
    return out


def alternate_calls(modes: dict, make_call, rounds: int, repeats: int, scale: float = 1.0) -> dict:
    """{mode: [median ms x ``scale`` per kept round]}: one call per mode made by ``make_call()`` under its flags
    (its own prepared weights and graphs), then each timed under its flags, the modes' order reversed every round,
    after a warm-up round that is not kept (alternate_rounds' order)."""
    calls = {}
    for mode, flags in modes.items():
        set_engine_flags(flags)
        try:
            calls[mode] = make_call()
            calls[mode]()
        finally:
            set_engine_flags({})
    times = {mode: [] for mode in modes}
    for r in range(rounds + 1):
        for mode in (list(modes) if r % 2 == 0 else list(modes)[::-1]):
            set_engine_flags(modes[mode])
            try:
                t = _median_ms(calls[mode], repeats) * scale
            finally:
                set_engine_flags({})
            if r:
                times[mode].append(t)
    return times


def error_time_table(rows, modes, lead: dict, error_key: str, time_key: str, error_head: str, time_head: str) -> str:
    """A markdown table of one row per measured cell: its ``lead`` columns ({header: row key}), then per mode the
    error (row[error_key][mode]) and the time (median of row[time_key][mode], with every round)."""
    import numpy as np
    lines = ["| " + " | ".join(lead) + " | " + " | ".join(f"{error_head} {m}" for m in modes) + " | "
             + " | ".join(f"{time_head} {m} (median; rounds)" for m in modes) + " |",
             "|" + "---|" * (len(lead) + 2 * len(modes))]
    for r in rows:
        errs = " | ".join(f"{r[error_key][m]:.2e}" for m in modes)
        times = " | ".join(f"{np.median(r[time_key][m]):.3f} ({', '.join(f'{t:.2f}' for t in r[time_key][m])})"
                           for m in modes)
        lines.append("| " + " | ".join(str(r[key]) for key in lead.values()) + f" | {errs} | {times} |")
    return "\n".join(lines)


def cell_problem(cell):
    """bench_persistent._problem of a (dtype, hidden, batch, layers, bidirectional) cell."""
    import bench_persistent as bp
    dtype, hidden, batch, layers, bidir = cell
    return bp._problem(dtype, hidden, batch, seed=hidden + batch + layers, layers=layers, bidirectional=bidir)


def whole_forward_us(config, weights, x, h0, c0, prepared, repeats) -> float:
    """µs/step of the inference forward with ``prepared`` weights (graph replay from the second call)."""
    fwd = lambda: persistent.forward(config, x, weights, h0, c0, prepared=prepared)  # noqa: E731
    return _median_ms(fwd, repeats) * 1e3 / STEPS


def time_mode(config, weights, x, h0, c0, repeats, train=True) -> dict:
    """The current flags' forward plan, kernel µs/step, whole forward µs/step (fresh prepared weights,
    so the graphs are this mode's) and, with ``train``, fwd+bwd ms."""
    plan = persistent._final(persistent.built_plans(config, train)["forward"])   # v58: after any fallback
    prepared = persistent.prepare(config, weights)
    out = {"plan": plan.describe(), "tagged": bool(getattr(plan, "tagged", False)),
           "kernel_us": _median_ms(kernel_launcher(config, prepared, x, h0, c0, plan), repeats) * 1e3 / STEPS}
    out["graph_fwd_us"] = whole_forward_us(config, weights, x, h0, c0, prepared, repeats)
    out["forward_kind"] = persistent.last_kinds.get("forward")
    if train:
        out["train_ms"] = _train_ms(config, weights, x, h0, c0, prepared, repeats)
    return out


def measure_modes(problem, modes: dict, repeats, other_first=False, train_modes=None, extra=None) -> dict:
    """``{mode}_{key}`` of time_mode for every mode of ``modes`` (name -> engine flags), in reverse
    name order (``other_first``: in name order, the order-bias check); fwd+bwd only for
    ``train_modes`` (all by default). ``extra(mode, out)`` runs under each mode's flags afterwards and
    may add keys. The flags are back at their defaults after, also when a mode fails. A mode that
    fails is recorded as ``{mode}_error`` and the others are still timed; if every mode fails, the
    first failure is raised (the row's error)."""
    config, weights, x, h0, c0 = problem
    out, failures = {}, []
    for mode in sorted(modes, reverse=not other_first):
        set_engine_flags(modes[mode])
        try:
            train = train_modes is None or mode in train_modes
            out.update({f"{mode}_{k}": v for k, v in time_mode(config, weights, x, h0, c0, repeats, train).items()})
            if extra is not None:
                extra(mode, out)
        except Exception as exc:  # noqa: BLE001 - recorded per mode, never hidden
            failures.append(exc)
            out[f"{mode}_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        finally:
            set_engine_flags({})
    if failures and len(failures) == len(modes):
        raise failures[0]
    return out


def pair_bench(rows, modes: dict, labels: tuple, name: str, order_flag: str, order_help: str):
    """(row, markdown, main) of a two-mode A/B bench (v22): ``modes`` = {first: flags, second: flags},
    timed in reverse name order (measure_modes) unless ``order_flag`` is given; the table is
    bench_persistent.pair_table's, with the ratios to cuDNN of the first mode."""
    import bench_persistent as bp
    first, second = modes

    def measure(dtype, hidden, batch, repeats, other_first=False):
        return measure_modes(bp._problem(dtype, hidden, batch, seed=hidden + batch), modes, repeats,
                             other_first=other_first)

    def row(dtype, hidden, batch, repeats, other_first=False):
        return bp.measured_row(measure, dtype, hidden, batch, repeats, other_first)

    def markdown(table_rows):
        return bp.pair_table(table_rows, first, second, labels)

    def main(argv=None):
        bp.ab_bench_main(argv, rows, row, markdown, name, order_flag, order_help)
    return row, markdown, main
