"""v48: the planner's 16-bit tensor-core forward step refitted on the H200's latest whole forwards. The constants
(costmodel.DEFAULTS mma_step_us, mma_vector_us, mma_weights_us) were fitted on the v4-era bf16 sweep; v39 and v46
found them 1.25–2x high for today's plans (the tagged exchange, batch groups, the in-kernel projection). Here every
16-bit inference row of the named bench JSONs (bench_persistent's row format; T=256, one layer, input = hidden) is a
point, at the batch the engine runs it as (v47's padding); calibrate._fit_mma_inference solves the three constants
by relative least squares, with every other constant as it is. Prints and writes the predictions before and after,
in-sample and leave-one-cell-out. Runs on the CPU.

    python benchmarks/refit_mma_forward_v48.py OUT_DIR [JSON ...]
Writes OUT_DIR/refit_mma_forward_v48.{json,md}.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_SOURCES = ["persistent_v46/7_bench_narrow_groups_v46.json", "persistent_v46/9_bench_narrow_groups_v46_small.json",
                   "persistent_v47/5_bench_batch_padding_v47.json", "persistent_v45/5_persistent_bench.json",
                   "persistent_v48/3_persistent_bench.json"]   # later files win where a cell repeats
SIXTEEN = ("float16", "bfloat16")
FITTED = ("mma_step_us", "mma_vector_us", "mma_weights_us", "mma_bwd_step_us", "mma_bwd_us_per_kclock")
# the constants before v48 (the "before" columns: in v48's terms, costmodel.mma_forward_terms; the v47 planner's own
# terms, H^2 without the groups and the in-kernel product, read the whole forwards 1.22-2.23x, median 1.62)
BEFORE = {"mma_step_us": 2.52, "mma_vector_us": 0.127, "mma_weights_us": 0.234, "mma_bwd_step_us": 1.13,
          "mma_bwd_us_per_kclock": 0.89}


def points_from(paths, training: bool = False) -> dict:
    """{(dtype, hidden, batch): µs/step} of the 16-bit rows, the whole forward or (``training``) fwd+bwd per step
    (the last file's value where cells repeat)."""
    cells = {}
    for path in paths:
        for row in json.load(open(path))["rows"]:
            value = row.get("persistent_train_ms") if training else row.get("persistent_us")
            if row.get("dtype") in SIXTEEN and value and row.get("steps", 256) == 256:
                cells[(row["dtype"], row["hidden"], row["batch"])] = float(value) * (1e3 / 256 if training else 1.0)
    return cells


def _run_config(cell, device, training: bool = False):
    """(the config at the batch the engine runs it as, its kernel as the cost model reads it)."""
    from ecornn import LSTMConfig
    from ecornn.planner import persistent_fit
    dtype, hidden, batch = cell
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 256)
    kernel = persistent_fit(config, device, training)
    return config.replace(batch=kernel.get("padded_batch", batch)), {k: v for k, v in kernel.items()
                                                                     if k != "padded_batch"}


def predictions(cells: dict, consts, device, training: bool = False) -> dict:
    from ecornn import costmodel
    out = {}
    for cell in cells:
        config, kernel = _run_config(cell, device, training)
        out[cell] = costmodel.predict_persistent_us(config, device, kernel, training, consts)
    return out


def refit(cells: dict, device, start):
    from ecornn.calibrate import _fit_mma_inference
    points = [(_run_config(cell, device)[0], us) for cell, us in cells.items()]
    return _fit_mma_inference(start, points, device)


def refit_backward(cells: dict, device, start):
    """The backward's (mma_bwd_step_us, mma_bwd_us_per_kclock) by relative least squares on fwd+bwd per step, the
    forward as ``start`` predicts it (fitted first)."""
    from ecornn import costmodel
    names = ("mma_bwd_step_us", "mma_bwd_us_per_kclock")
    rows, targets, scale = [], [], []
    for cell, us in cells.items():
        config, kernel = _run_config(cell, device, True)
        rest = costmodel.predict_persistent_us(config, device, kernel, True,
                                               dataclasses.replace(start, **dict.fromkeys(names, 0.0)))
        rows.append([1.0, kernel["mma_bwd_clocks"] / 1e3])
        targets.append(us - rest)
        scale.append(us)
    scale = np.array(scale)
    theta = np.linalg.lstsq(np.array(rows) / scale[:, None], np.array(targets) / scale, rcond=None)[0]
    return dataclasses.replace(start, **{n: float(max(t, 0.0)) for n, t in zip(names, theta)})


def leave_one_out(cells: dict, device, start, fit=refit, training: bool = False) -> dict:
    out = {}
    for cell in cells:
        rest = {c: us for c, us in cells.items() if c != cell}
        out[cell] = predictions({cell: cells[cell]}, fit(rest, device, start), device, training)[cell]
    return out


def report(cells, before, after, held_out, consts) -> str:
    ratio = lambda pred: np.array([pred[c] / cells[c] for c in cells])  # noqa: E731
    lines = ["| cell | measured µs/step | predicted before | after | held out |", "|---|---|---|---|---|"]
    for cell, us in sorted(cells.items()):
        lines.append(f"| {cell[0]} H={cell[1]} B={cell[2]} | {us:.2f} | {before[cell]:.2f} ({before[cell] / us:.2f}x) | "
                     f"{after[cell]:.2f} ({after[cell] / us:.2f}x) | {held_out[cell]:.2f} ({held_out[cell] / us:.2f}x) |")
    for name, pred in (("before", before), ("after", after), ("held out", held_out)):
        r = ratio(pred)
        lines.append(f"\n{name}: predicted/measured {r.min():.2f}–{r.max():.2f}, median {np.median(r):.2f}, "
                     f"within 15% in {int(np.sum(np.abs(r - 1) <= 0.15))} of {len(r)}")
    lines.append(f"\nfitted: mma_step_us {consts.mma_step_us:.3f}, mma_vector_us {consts.mma_vector_us:.4f}, "
                 f"mma_weights_us {consts.mma_weights_us:.4f}, mma_bwd_step_us {consts.mma_bwd_step_us:.3f}, "
                 f"mma_bwd_us_per_kclock {consts.mma_bwd_us_per_kclock:.3f}")
    return "\n".join(lines)


def _shown(path) -> str:
    """A source as benchmarks/-relative where it lies there (the report names no machine's paths)."""
    path = Path(path).resolve()
    return str(path.relative_to(RESULTS.parent)) if RESULTS.parent in path.parents else str(path)


def main(argv=None):
    from ecornn import costmodel
    from ecornn.devices import KNOWN
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0] if argv else ".")
    sources = argv[1:] or [RESULTS / s for s in DEFAULT_SOURCES]
    device, start = KNOWN["h200"], dataclasses.replace(costmodel.DEFAULTS, **BEFORE)
    cells, train_cells = points_from(sources), points_from(sources, training=True)
    fitted = refit(cells, device, start)
    fitted = refit_backward(train_cells, device, fitted)
    parts, payload = [], {"sources": [_shown(s) for s in sources], "fitted": {k: getattr(fitted, k) for k in FITTED}}
    for name, data, training, fit in (("whole forward", cells, False, refit),
                                      ("forward + backward per step", train_cells, True, None)):
        before, after = predictions(data, start, device, training), predictions(data, fitted, device, training)
        held_out = leave_one_out(data, device, start if fit else fitted, fit or refit_backward, training)
        parts.append(f"## {name}\n\n" + report(data, before, after, held_out, fitted))
        payload[name] = [{"dtype": c[0], "hidden": c[1], "batch": c[2], "measured_us": us, "before_us": before[c],
                          "after_us": after[c], "held_out_us": held_out[c]} for c, us in sorted(data.items())]
    text = "\n\n".join(parts)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "refit_mma_forward_v48.md").write_text(f"Sources: {', '.join(_shown(s) for s in sources)}\n\n{text}\n")
    (out / "refit_mma_forward_v48.json").write_text(json.dumps(payload, indent=1))


if __name__ == "__main__":
    main()
