"""The persistent plots from a sweep run with the cuDNN column (`python -m ecornn.run sweep ...`
without --no-torch): forward µs/step vs batch (at one H) and vs hidden size (at one B), one line per
ecornn strategy and torch.nn.LSTM (cuDNN), the grid-sync floor drawn in. Runs on the CPU.

    python benchmarks/plot_persistent_sweep.py SWEEP.json --out-prefix benchmarks/results/persistent \
        [--hidden 1024] [--batch 4] [--floor-us 0.99]
Writes <prefix>_vs_batch_<dtype>.png and <prefix>_vs_hidden_<dtype>.png for every dtype in the sweep.
"""
import argparse
import json

LINES = (("persistent_us", "persistent", "o-"), ("fused_us", "fused", "s-"), ("cudnn_us", "cuDNN (torch.nn.LSTM)", "kx--"))


def series(cells, dtype, axis, fixed_key, fixed_value):
    """Inference cells of ``dtype`` with ``fixed_key == fixed_value``, sorted along ``axis``."""
    sel = [c for c in cells if c["dtype"] == dtype and c["mode"] == "inference" and c[fixed_key] == fixed_value]
    return sorted(sel, key=lambda c: c[axis])


def plot_one(cells, axis, title, path, floor_us, device):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 4))
    for field, label, style in LINES:
        pts = [(c[axis], c[field]) for c in cells if c.get(field)]
        if pts:
            ax.plot(*zip(*pts), style, label=label)
    if floor_us:
        ax.axhline(floor_us, color="grey", ls=":", label=f"grid.sync floor {floor_us} µs")
    ax.set(xscale="log" if axis == "batch" else "linear", yscale="log", xlabel=axis,
           ylabel="forward µs / step", title=f"{title}, {device}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sweep")
    parser.add_argument("--out-prefix", required=True)
    parser.add_argument("--hidden", type=int, default=1024, help="H of the vs-batch plot")
    parser.add_argument("--batch", type=int, default=4, help="B of the vs-hidden plot")
    parser.add_argument("--floor-us", type=float, default=0.99, help="grid.sync latency of the device")
    args = parser.parse_args(argv)
    with open(args.sweep) as fh:
        data = json.load(fh)
    device, cells, written = data.get("meta", {}).get("device", "?"), data["cells"], []
    for dtype in sorted({c["dtype"] for c in cells}):
        by_batch = series(cells, dtype, "batch", "hidden", args.hidden)
        by_hidden = series(cells, dtype, "hidden", "batch", args.batch)
        if len(by_batch) > 1:
            written.append(plot_one(by_batch, "batch", f"{dtype} H={args.hidden} T=256",
                                    f"{args.out_prefix}_vs_batch_{dtype}.png", args.floor_us, device))
        if len(by_hidden) > 1:
            written.append(plot_one(by_hidden, "hidden", f"{dtype} B={args.batch} T=256",
                                    f"{args.out_prefix}_vs_hidden_{dtype}.png", args.floor_us, device))
    print("\n".join(written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
