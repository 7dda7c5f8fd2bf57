"""v50: the planner's fp32 persistent forward refitted on the H200's latest whole forwards, with the input projection
priced as the engine computes it (costmodel.forward_projection_us: the fp16 split on the tensor cores; until v49 an
SGEMM at the FMA peak). Every fp32 inference row of the named bench JSONs (bench_persistent's row format; T=256, one
layer, input = hidden) is a point at the batch the engine runs it as (v47's padding), the median where a cell
repeats. Per kernel family (calibrate._kernel_family) relative least squares: the split's constants (FAMILIES) where
it has POINTS_PER_UNKNOWN cells per unknown, else its fixed term alone (the slopes as they are); the FFMA kernels'
(B=1) fixed terms alone (the grid's as its tagged step, v50's grid_tagged_step_us). Prints and writes the predictions before and after, in-sample and leave-one-cell-out,
and fwd+bwd per step (the backward's constants are v45's, unchanged). Runs on the CPU.

    python benchmarks/refit_fp32_forward_v50.py OUT_DIR [JSON ...]
Writes OUT_DIR/refit_fp32_forward_v50.{json,md}.
"""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from refit_mma_forward_v48 import RESULTS, _run_config, _shown  # noqa: E402

DEFAULT_SOURCES = ["persistent_v44/4_bench_group_clusters_v44.json", "persistent_v47/5_bench_batch_padding_v47.json", "persistent_v49/3_persistent_bench.json",
                   "persistent_v49/8_persistent_bench.json", "persistent_v50/3_sweep_strategies_v50.json"]
POINTS_PER_UNKNOWN = 2   # fewer cells: the family's fixed term alone
# each family's unknowns, in the order of their terms (fixed, H*B/1e3, mma x H^2/1e6); the clustered split's vector
# slope stays 0 (v43's fit found none; each block stages half the vector)
FAMILIES = {"split": ("split_step_us", "split_vector_us", "split_mma_us"),
            "split_cluster": ("split_cluster_step_us", None, "split_cluster_mma_us"),
            "grid": ("grid_tagged_step_us",), "cluster": ("cluster_step_us",)}
# the constants before v50 (costmodel.DEFAULTS of v49), with v49's projection (an SGEMM at the FMA peak)
BEFORE = {"split_step_us": 1.68, "split_vector_us": 0.089, "split_mma_us": 0.21, "split_cluster_step_us": 1.65,
          "split_cluster_vector_us": 0.0, "split_cluster_mma_us": 0.084, "cluster_step_us": 1.33,
          "grid_tagged_step_us": 1.2 + 1.13}   # v49 priced the tagged grid step as grid.sync + exchange


def points_from(paths, training: bool = False) -> dict:
    """{(hidden, batch): µs/step} of the fp32 rows, whole forward or (``training``) fwd+bwd per step; the median
    over the files where a cell repeats."""
    cells = {}
    for path in paths:
        for row in json.load(open(path))["rows"]:
            value = row.get("persistent_train_ms") if training else row.get("persistent_us")
            if row.get("dtype") == "float32" and value and row.get("steps", 256) == 256:
                cells.setdefault(("float32", row["hidden"], row["batch"]), []).append(
                    float(value) * (1e3 / 256 if training else 1.0))
    return {cell: float(np.median(values)) for cell, values in cells.items()}


def family(cell, device) -> str:
    from ecornn.calibrate import _kernel_family
    kernel = _run_config(cell, device)[1]
    kind = _kernel_family(kernel)
    if kind == "fp32":
        return "cluster" if kernel.get("cluster_blocks") else "grid"
    return kind


def predictions(cells, consts, device, training=False, old_projection=False) -> dict:
    from ecornn import costmodel
    out = {}
    for cell in cells:
        config, kernel = _run_config(cell, device, training)
        if old_projection:   # v49's model: the forward's projection an SGEMM at the FMA peak
            original = costmodel.forward_projection_us
            costmodel.forward_projection_us = lambda c, d, k, k_consts: costmodel._gemm_us(
                2.0 * c.batch * c.gate_size * k * c.num_directions, c, d, k_consts)
            try:
                out[cell] = costmodel.predict_persistent_us(config, device, kernel, training, consts)
            finally:
                costmodel.forward_projection_us = original
        else:
            out[cell] = costmodel.predict_persistent_us(config, device, kernel, training, consts)
    return out


def _terms(cell, device, names) -> list:
    """The unknowns' coefficients of a cell's forward per step (1 for a fixed term, the slopes' terms)."""
    from ecornn import costmodel
    config, kernel = _run_config(cell, device)
    if len(names) == 1:
        return [1.0]
    terms = [1.0, *costmodel.split_step_terms(config, kernel["split_mma"], kernel.get("split_groups", 1))]
    return [t for t, name in zip(terms, names) if name is not None]


def refit(cells: dict, device, start):
    """Each family's unknowns by relative least squares, every other constant as ``start`` has it."""
    consts = start
    for kind, names in FAMILIES.items():
        chosen = {c: us for c, us in cells.items() if family(c, device) == kind}
        if not chosen:
            continue
        unknowns = sum(n is not None for n in names)
        names = names if len(chosen) >= POINTS_PER_UNKNOWN * unknowns else names[:1]
        rows = np.array([_terms(c, device, names) for c in chosen])
        names = [n for n in names if n is not None]
        zeroed = dataclasses.replace(consts, **dict.fromkeys(names, 0.0))
        rest = predictions(chosen, zeroed, device)
        scale = np.array(list(chosen.values()))
        target = np.array([us - rest[c] for c, us in chosen.items()])
        theta = np.linalg.lstsq(rows / scale[:, None], target / scale, rcond=None)[0]
        theta = np.maximum(theta, [0.3] + [0.0] * (len(names) - 1))   # a barrier at least; no negative slopes
        consts = dataclasses.replace(consts, **{n: float(t) for n, t in zip(names, theta)})
    return consts


def leave_one_out(cells, device, start) -> dict:
    out = {}
    for cell in cells:
        rest = {c: us for c, us in cells.items() if c != cell}
        out[cell] = predictions({cell: cells[cell]}, refit(rest, device, start), device)[cell]
    return out


def report(cells, device, columns: dict) -> str:
    names = list(columns)
    lines = ["| cell | kernel | measured µs/step | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
    for cell, us in sorted(cells.items()):
        lines.append(f"| H={cell[1]} B={cell[2]} | {family(cell, device)} | {us:.2f} | " + " | ".join(
            f"{columns[n][cell]:.2f} ({columns[n][cell] / us:.2f}x)" for n in names) + " |")
    for name in names:
        r = np.array([columns[name][c] / cells[c] for c in cells])
        lines.append(f"\n{name}: predicted/measured {r.min():.2f}–{r.max():.2f}, median {np.median(r):.2f}, "
                     f"within 15% in {int(np.sum(np.abs(r - 1) <= 0.15))} of {len(r)}")
    return "\n".join(lines)


def main(argv=None):
    from ecornn import costmodel
    from ecornn.devices import KNOWN
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0] if argv else ".")
    sources = argv[1:] or [RESULTS / s for s in DEFAULT_SOURCES]
    device = KNOWN["h200"]
    start = dataclasses.replace(costmodel.DEFAULTS, **BEFORE)
    cells, train_cells = points_from(sources), points_from(sources, training=True)
    fitted = refit(cells, device, start)
    forward = {"before (v49)": predictions(cells, start, device, old_projection=True),
               "new projection, v49 constants": predictions(cells, start, device),
               "refitted": predictions(cells, fitted, device), "held out": leave_one_out(cells, device, start)}
    training = {"before (v49)": predictions(train_cells, start, device, True, old_projection=True),
                "refitted": predictions(train_cells, fitted, device, True)}
    all_names = [n for names in FAMILIES.values() for n in names if n is not None]
    constants = {n: round(getattr(fitted, n), 4) for n in all_names}
    text = (f"## whole forward\n\n{report(cells, device, forward)}\n\n## forward + backward per step\n\n"
            f"{report(train_cells, device, training)}\n\nfitted: {json.dumps(constants)}")
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "refit_fp32_forward_v50.md").write_text(f"Sources: {', '.join(_shown(s) for s in sources)}\n\n{text}\n")
    (out / "refit_fp32_forward_v50.json").write_text(json.dumps(
        {"sources": [_shown(s) for s in sources], "fitted": constants,
         "forward": {f"H={c[1]} B={c[2]}": {"measured": us, **{n: v[c] for n, v in forward.items()}}
                     for c, us in sorted(cells.items())}}, indent=1))


if __name__ == "__main__":
    main()
