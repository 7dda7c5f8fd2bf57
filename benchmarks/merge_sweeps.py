"""Merge saved sweeps (`python -m ecornn.run sweep --json ...`) into one table, JSON, CSV and plot.

A cell measured in several files is taken from the last file that has it, so a re-measured part of a
grid replaces the older numbers. Runs on the CPU.

    python benchmarks/merge_sweeps.py a.json b.json --title "..." --out benchmarks/results/name
"""
import argparse
import json

from ecornn.sweep import Cell, format_table, pick_quality, plot, write_csv, write_json

STRATEGIES = ("persistent", "fused")
ORDER = {"float32": 0, "float16": 1, "bfloat16": 2, "inference": 0, "training": 1}


def merged_cells(paths):
    """(cells in grid order, per-file meta): later files override earlier ones cell by cell."""
    cells, metas = {}, []
    for path in paths:
        with open(path) as fh:
            data = json.load(fh)
        metas.append({"file": path, **data.get("meta", {})})
        for row in data["cells"]:
            cell = Cell.from_row(row)
            cells[(cell.dtype, cell.mode, cell.hidden, cell.batch)] = cell
    key = lambda c: (ORDER.get(c.dtype, 9), ORDER.get(c.mode, 9), c.hidden, c.batch)  # noqa: E731
    return sorted(cells.values(), key=key), metas


def crossovers(cells) -> str:
    """Per (dtype, mode, H): the smallest batch from which `fused` is measured fastest (and stays so),
    and the same for the planner's pick."""
    lines = ["dtype | mode | H | measured crossover B | planner crossover B",
             "--- | --- | --- | --- | ---"]
    groups = sorted({(c.dtype, c.mode, c.hidden) for c in cells},
                    key=lambda g: (ORDER.get(g[0], 9), ORDER.get(g[1], 9), g[2]))
    for dtype, mode, hidden in groups:
        row = sorted((c for c in cells if (c.dtype, c.mode, c.hidden) == (dtype, mode, hidden)),
                     key=lambda c: c.batch)
        lines.append(f"{dtype} | {mode} | {hidden} | {_first_of_fused_tail([c.best for c in row], row)} | "
                     f"{_first_of_fused_tail([c.pick for c in row], row)}")
    return "\n".join(lines)


def _first_of_fused_tail(choices, row) -> str:
    """The batch where the trailing run of "fused" starts ("none" if the last is not fused)."""
    start = None
    for choice, cell in zip(choices, row):
        if choice == "fused":
            start = cell.batch if start is None else start
        else:
            start = None
    return "none" if start is None else str(start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweeps", nargs="+")
    parser.add_argument("--out", required=True, help="path prefix: writes .json, .csv, .md and .png")
    parser.add_argument("--title", default="Planner sweep (merged)")
    args = parser.parse_args()
    cells, metas = merged_cells(args.sweeps)
    quality = pick_quality(cells)
    write_json(cells, args.out + ".json", {"merged_from": metas})
    write_csv(cells, args.out + ".csv")
    plot(cells, args.out + ".png", STRATEGIES)
    summary = (f"planner: pick within 10% of the fastest in {quality['within_10pct']:.1%} of "
               f"{quality['cells']} cells; worst pick/best {quality['worst']:.2f}")
    with open(args.out + ".md", "w") as fh:
        fh.write(f"# {args.title}\n\nMerged from: {', '.join(m['file'] for m in metas)}\n\n"
                 f"{summary}\n\n## Crossovers (persistent below, fused from)\n\n{crossovers(cells)}\n\n"
                 f"## Cells\n\n{format_table(cells, STRATEGIES)}\n")
    print(summary)


if __name__ == "__main__":
    main()
