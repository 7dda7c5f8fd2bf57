"""One optimizer step of an LSTM layer through the PyTorch adapter, against torch.nn.LSTM (cuDNN,
PyTorch defaults), in one process (v10).

A step is what a training loop runs: zero the gradients, forward (T=256, 1 layer, input=hidden,
random non-zero inputs), backward from a random upstream gradient (x's gradient too), SGD step.
ecornn.torch.LSTM(strategy="persistent") runs:
- ``graphs``: as shipped: prepared weights kept across steps, refreshed in place after each
  optimizer step (a graph from the second refresh on), training calls replayed from graphs;
- ``eager refresh``: the same with refresh graphs off (persistent_refresh.ENABLED=False);
- ``eager``: training and refresh graphs off (prepared weights still kept);
- ``prepare per step``: ``reset_prepared()`` before each step, what v9's adapter did (it prepared
  inside every training call and ran it eagerly).
CUDA events around each step, median; the GPU name and versions head the tables.

    python benchmarks/bench_torch_loop.py OUT_DIR [--repeats N] [--rows N]
Writes OUT_DIR/torch_loop_bench.{json,md}.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, bench_meta, fmt, save_rows  # noqa: E402

ROWS = [("float16", 1024, 8), ("float16", 1024, 16), ("bfloat16", 1024, 4), ("float32", 1024, 8),
        ("float32", 512, 4), ("float32", 256, 1), ("bfloat16", 2048, 4)]
MODES = ("graphs", "eager_refresh", "eager", "prepare_per_step")


def _timed_ms(step, repeats):
    from ecornn.baselines import median_cuda_us
    return median_cuda_us(step, repeats) / 1e3


def _loop_step(module, x, upstream):
    import torch
    optimizer = torch.optim.SGD(module.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        y, _ = module(x.detach().requires_grad_(True))
        y.backward(upstream)
        optimizer.step()
    return step


def _mode(name):
    """Context manager setting the engine switches of mode ``name``."""
    import contextlib
    from ecornn.engines import persistent_refresh, persistent_train_graph

    @contextlib.contextmanager
    def switched():
        saved = persistent_refresh.ENABLED, persistent_train_graph.ENABLED
        persistent_refresh.ENABLED = name == "graphs"
        persistent_train_graph.ENABLED = name in ("graphs", "eager_refresh")
        try:
            yield
        finally:
            persistent_refresh.ENABLED, persistent_train_graph.ENABLED = saved
    return switched()


def row(dtype, hidden, batch, repeats):
    import torch
    import ecornn.torch as etorch
    tdtype = getattr(torch, dtype)
    torch.manual_seed(hidden + batch)
    entry = {"dtype": dtype, "hidden": hidden, "batch": batch, "steps": STEPS}
    x = torch.randn(STEPS, batch, hidden, device="cuda", dtype=tdtype)
    upstream = torch.randn(STEPS, batch, hidden, device="cuda", dtype=tdtype)
    theirs = torch.nn.LSTM(hidden, hidden).cuda().to(tdtype)
    entry["cudnn_ms"] = _timed_ms(_loop_step(theirs, x, upstream), repeats)
    for name in MODES:
        ours = etorch.LSTM(hidden, hidden, strategy="persistent").cuda().to(tdtype)
        ours.load_state_dict(theirs.state_dict())
        step = _loop_step(ours, x, upstream)
        if name == "prepare_per_step":
            inner, step = step, (lambda: (ours.reset_prepared(), inner()))
        try:
            with _mode(name):
                entry[f"{name}_ms"] = _timed_ms(step, repeats)
        except Exception as exc:  # NotSupported or a failure: recorded, never hidden
            entry[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        entry["plan"] = list(ours.last_plan or ())
    print(entry, flush=True)
    return entry


def markdown(rows):
    head = ("| dtype | H | B | graphs ms | eager refresh | eager | prepare per step (v9 adapter) | cuDNN ms | "
            "vs cuDNN | vs v9 adapter |")
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        ours, cudnn, v9 = r.get("graphs_ms"), r.get("cudnn_ms"), r.get("prepare_per_step_ms")
        lines.append("| " + " | ".join([
            r["dtype"], str(r["hidden"]), str(r["batch"]), fmt(ours), fmt(r.get("eager_refresh_ms")),
            fmt(r.get("eager_ms")), fmt(v9), fmt(cudnn),
            fmt(cudnn / ours if ours and cudnn else None, ".2f") + "x",
            fmt(v9 / ours if ours and v9 else None, ".2f") + "x"]) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rows", type=int, default=len(ROWS))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    rows = [row(*spec, args.repeats) for spec in ROWS[:args.rows]]
    table = markdown(rows)
    print(table)
    save_rows(out, "torch_loop_bench", meta, rows, table)


if __name__ == "__main__":
    main()
