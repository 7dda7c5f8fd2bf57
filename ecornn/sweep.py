"""Sweeps over grids of hidden size, batch, dtype and mode: every ecornn strategy, torch.nn.LSTM
(cuDNN) when present, and the planner's pick, as a terminal table, JSON, CSV and a PNG plot."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field

import numpy as np

from .baselines import time_torch_lstm, torch_available
from .config import LSTMConfig
from .errors import NotSupported
from .planner import plan
from .progress import Progress


@dataclass
class Cell:
    hidden: int
    batch: int
    dtype: str
    mode: str                                   # "inference" or "training"
    us: dict = field(default_factory=dict)      # strategy -> µs/step (None: could not run)
    notes: dict = field(default_factory=dict)   # strategy -> why not
    cudnn_us: float | None = None
    pick: str = ""
    pick_reason: str = ""

    @property
    def best(self) -> str | None:
        ran = {k: v for k, v in self.us.items() if v is not None}
        return min(ran, key=ran.get) if ran else None

    @property
    def pick_over_best(self) -> float | None:
        best = self.best
        if best is None or self.us.get(self.pick) is None:
            return None
        return self.us[self.pick] / self.us[best]

    def as_row(self) -> dict:
        row = {"hidden": self.hidden, "batch": self.batch, "dtype": self.dtype, "mode": self.mode}
        row.update({f"{k}_us": v for k, v in self.us.items()})
        row.update({"cudnn_us": self.cudnn_us, "pick": self.pick, "best": self.best,
                    "pick_over_best": self.pick_over_best, "pick_reason": self.pick_reason})
        row.update({f"{k}_note": v for k, v in self.notes.items()})
        return row

    @classmethod
    def from_row(cls, row: dict) -> "Cell":
        """The inverse of as_row (for merging and re-plotting saved sweeps)."""
        us = {k[:-3]: v for k, v in row.items() if k.endswith("_us") and k != "cudnn_us"}
        notes = {k[:-5]: v for k, v in row.items() if k.endswith("_note")}
        return cls(row["hidden"], row["batch"], row["dtype"], row["mode"], us, notes,
                   row.get("cudnn_us"), row.get("pick", ""), row.get("pick_reason", ""))


def run_cell(cell: Cell, strategies, seq_len, iterations, xp, with_torch, time_config) -> Cell:
    config = LSTMConfig(cell.hidden, cell.hidden, dtype=cell.dtype, batch=cell.batch, seq_len=seq_len)
    training = cell.mode == "training"
    for strategy in strategies:
        try:
            result = time_config(config, strategy, iterations, training, xp=xp, progress=False)
            cell.us[strategy] = result["us_per_step"]
        except NotSupported as exc:
            cell.us[strategy], cell.notes[strategy] = None, exc.reason
        except Exception as exc:  # a failing kernel must not end the sweep; it is reported
            cell.us[strategy], cell.notes[strategy] = None, f"error: {type(exc).__name__}: {exc}"[:300]
    chosen = plan(config, "auto", training)
    cell.pick, cell.pick_reason = chosen.strategy, chosen.reason
    if with_torch and cell.dtype != "float64":
        cell.cudnn_us = time_torch_lstm(config, training, iterations)
    return cell


def run_sweep(hiddens, batches, dtypes, modes, strategies, seq_len, iterations, xp, time_config,
              with_torch=None, progress=True, on_cell=None) -> list:
    """Time every cell; ``on_cell(done_cells)`` after each (e.g. to save partial results)."""
    with_torch = torch_available() if with_torch is None else with_torch
    grid = [Cell(h, b, d, m) for d in dtypes for m in modes for h in hiddens for b in batches]
    bar = Progress(len(grid), "sweep") if progress else None
    for index, cell in enumerate(grid):
        run_cell(cell, strategies, seq_len, iterations, xp, with_torch, time_config)
        if on_cell:
            on_cell(grid[:index + 1])
        if bar:
            bar.update()
    if bar:
        bar.close()
    return grid


def format_table(cells, strategies) -> str:
    head = ["dtype", "mode", "H", "B"] + [f"{s} us" for s in strategies] + ["cuDNN us", "pick", "pick/best"]
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    fmt = lambda v: "n/a" if v is None else f"{v:.2f}"  # noqa: E731
    for c in cells:
        ratio = c.pick_over_best
        lines.append(" | ".join([c.dtype, c.mode, str(c.hidden), str(c.batch)]
                                + [fmt(c.us.get(s)) for s in strategies]
                                + [fmt(c.cudnn_us), c.pick, fmt(ratio)]))
    return "\n".join(lines)


def pick_quality(cells) -> dict:
    """Share of cells whose pick is within 10% of the fastest measured strategy, and the worst."""
    ratios = [c.pick_over_best for c in cells if c.pick_over_best is not None]
    if not ratios:
        return {"cells": 0}
    return {"cells": len(ratios), "within_10pct": float(np.mean([r <= 1.10 for r in ratios])),
            "worst": float(max(ratios)), "misses": [c.as_row() for c in cells
                                                    if c.pick_over_best and c.pick_over_best > 1.10]}


def write_json(cells, path, meta: dict) -> None:
    with open(path, "w") as fh:
        json.dump({"meta": meta, "quality": pick_quality(cells), "cells": [c.as_row() for c in cells]},
                  fh, indent=2)


def write_csv(cells, path) -> None:
    rows = [c.as_row() for c in cells]
    keys = list(dict.fromkeys(k for r in rows for k in r))  # first-seen order
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)


def plot(cells, path, strategies, sync_floor_us=None) -> str:
    """µs/step vs batch, one panel per (dtype, mode, H); the planner's pick circled."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = sorted({(c.dtype, c.mode, c.hidden) for c in cells})
    cols = min(4, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.3 * rows), squeeze=False)
    for ax, (dtype, mode, hidden) in zip(axes.flat, panels):
        sel = sorted((c for c in cells if (c.dtype, c.mode, c.hidden) == (dtype, mode, hidden)),
                     key=lambda c: c.batch)
        batches = [c.batch for c in sel]
        for s in strategies:
            ax.plot(batches, [c.us.get(s) if c.us.get(s) is not None else np.nan for c in sel],
                    marker="o", label=s)
        if any(c.cudnn_us for c in sel):
            ax.plot(batches, [c.cudnn_us or np.nan for c in sel], "k--", marker="x", label="cuDNN")
        picked = [(c.batch, c.us[c.pick]) for c in sel if c.us.get(c.pick) is not None]
        if picked:
            ax.scatter(*zip(*picked), s=160, facecolors="none", edgecolors="red", label="planner pick")
        if sync_floor_us:
            ax.axhline(sync_floor_us, color="grey", lw=0.8, ls=":", label="grid-sync floor")
        ax.set(xscale="log", yscale="log", title=f"{dtype} {mode} H={hidden}", xlabel="batch",
               ylabel="µs / step")
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
