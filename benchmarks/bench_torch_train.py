"""Character-level LM training: ecornn.torch.LSTM against torch.nn.LSTM, in one process.

Both models start from the same weights (one state dict loaded into the other) and see the same
batches of a generated corpus; the script reports each one's loss curve, final loss and median
step time (forward + loss + backward + Adam step, synchronised) and which ecornn strategy ran.

    python benchmarks/bench_torch_train.py --out "$OUT"              # GPU defaults
    python benchmarks/bench_torch_train.py --out /tmp/b --device cpu --steps 30 --hidden 32

Writes ``bench_torch_train.json`` and ``bench_torch_train.md`` under ``--out``.
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

import ecornn
import ecornn.torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


# ---- data ----------------------------------------------------------------------------------

def make_corpus(num_chars: int, seed: int = 0) -> str:
    """Text from a word-level Markov chain over made-up words: learnable at the character level
    (spelling inside words, likely next words) but not trivial."""
    rng = np.random.default_rng(seed)
    syllables = ["ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "de", "zu", "ba", "fe"]
    words = sorted({"".join(rng.choice(syllables, size=rng.integers(1, 4))) for _ in range(60)})
    # peaked transition rows: each word has a few likely successors
    follow = rng.dirichlet(np.full(len(words), 0.1), size=len(words))
    out, word, length = [], rng.integers(len(words)), 0
    while length < num_chars:
        text = words[word] + ("." if rng.random() < 0.1 else "") + " "
        out.append(text)
        length += len(text)
        word = rng.choice(len(words), p=follow[word])
    return "".join(out)[:num_chars]


def encode(text: str):
    vocab = sorted(set(text))
    index = {ch: i for i, ch in enumerate(vocab)}
    return torch.tensor([index[ch] for ch in text], dtype=torch.long), len(vocab)


def make_batches(ids, steps: int, batch: int, seq_len: int, seed: int = 0) -> list:
    """(input, target) pairs [B, T] of random windows, drawn up front so both runs see them."""
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, len(ids) - seq_len - 1, (steps, batch), generator=gen)
    offsets = torch.arange(seq_len + 1)
    windows = ids[starts[..., None] + offsets]  # [steps, B, T+1]
    return [(w[:, :-1], w[:, 1:]) for w in windows]


# ---- model and training --------------------------------------------------------------------

class CharLM(nn.Module):
    """Embedding -> LSTM (batch_first) -> Linear; ``lstm_class`` picks torch's or ecornn's."""

    def __init__(self, lstm_class, vocab, embed, hidden, layers=1, dropout=0.0, **lstm_kwargs):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = lstm_class(embed, hidden, layers, batch_first=True, dropout=dropout,
                               **lstm_kwargs)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens):
        y, _ = self.lstm(self.embed(tokens))
        return self.head(y)


def train(model, batches, device, lr=3e-3, warmup=5) -> dict:
    """Adam over ``batches``; per-step loss and wall time (synchronised, after ``warmup`` steps)."""
    half = next(model.parameters()).dtype == torch.float16
    # Adam's default eps (1e-8) is 0 in float16, and 0/0 turns untouched rows into NaN
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, eps=1e-4 if half else 1e-8)
    losses, times = [], []
    for step, (inputs, targets) in enumerate(batches):
        inputs, targets = inputs.to(device), targets.to(device)
        _sync(device)
        start = time.perf_counter()
        logits = model(inputs)
        loss = nn.functional.cross_entropy(logits.float().flatten(0, 1), targets.flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        _sync(device)
        if step >= warmup:
            times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return {"losses": losses, "step_ms": 1e3 * statistics.median(times) if times else None}


def _sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def final_loss(losses, window):
    tail = np.asarray(losses[-window:])
    return float(tail.mean()), float(tail.std(ddof=1) if len(tail) > 1 else 0.0)


def compare(args, dtype_name: str, batch: int) -> dict:
    """Train torch.nn.LSTM and ecornn.torch.LSTM from one init on one data stream."""
    device, dtype = torch.device(args.device), DTYPES[dtype_name]
    ids, vocab = encode(make_corpus(args.corpus_chars, seed=args.seed))
    batches = make_batches(ids, args.steps, batch, args.seq_len, seed=args.seed)
    sizes = dict(vocab=vocab, embed=args.embed, hidden=args.hidden, layers=args.layers,
                 dropout=args.dropout)
    torch.manual_seed(args.seed)
    reference = CharLM(nn.LSTM, **sizes).to(device, dtype)
    ours = CharLM(ecornn.torch.LSTM, strategy=args.strategy, **sizes).to(device, dtype)
    ours.load_state_dict(reference.state_dict())
    record = {"dtype": dtype_name, **sizes, "batch": batch, "seq_len": args.seq_len,
              "steps": args.steps, "initial_loss_uniform": math.log(vocab)}

    plan = _probe_plan(ours, batches[0][0].to(device))
    record["ecornn_strategy"], record["ecornn_reason"] = plan
    if device.type == "cuda" and plan[0] == "reference" and not args.allow_reference:
        record["skipped"] = "no GPU strategy is feasible here (it would run on the host reference)"
        return record

    torch.manual_seed(args.seed + 1)  # same dropout stream start for both
    runs = {"torch": train(reference, batches, device, lr=args.lr)}
    torch.manual_seed(args.seed + 1)
    runs["ecornn"] = train(ours, batches, device, lr=args.lr)
    record["ecornn_strategy"], record["ecornn_reason"] = ours.lstm.last_plan  # as trained
    window = max(1, args.steps // 10)
    for name, run in runs.items():
        mean, std = final_loss(run["losses"], window)
        record[name] = {"final_loss": mean, "final_loss_std": std, "step_ms": run["step_ms"],
                        "loss_every_10": run["losses"][::10]}
    diff = abs(record["ecornn"]["final_loss"] - record["torch"]["final_loss"])
    noise = max(record["torch"]["final_loss_std"], record["ecornn"]["final_loss_std"], 1e-3)
    record["loss_diff"], record["same_loss_within_noise"] = diff, bool(diff <= noise)
    if record["torch"]["step_ms"] and record["ecornn"]["step_ms"]:
        record["speedup"] = record["torch"]["step_ms"] / record["ecornn"]["step_ms"]
    return record


def _probe_plan(model, tokens):
    with torch.no_grad():
        model(tokens)
    return model.lstm.last_plan


# ---- output --------------------------------------------------------------------------------

def environment(device) -> dict:
    env = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
           "ecornn": ecornn.__version__, "device": str(device)}
    if torch.device(device).type == "cuda":
        env["gpu"] = torch.cuda.get_device_name(device)
        env["cudnn"] = torch.backends.cudnn.version()
        env["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
        env["matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
        try:
            import cupy
            env["cupy"] = cupy.__version__
        except ImportError:
            pass
    return env


def markdown(env, records) -> str:
    lines = ["# Char-LM training: ecornn.torch.LSTM vs torch.nn.LSTM (same process)", "",
             ", ".join(f"{k}={v}" for k, v in env.items()), "",
             "Step = forward + cross-entropy + backward + Adam step, synchronised; median after "
             "5 warm-up steps. Final loss = mean of the last 10% of steps; 'same' = the two final "
             "losses differ by at most one per-step standard deviation of that window.", "",
             "| dtype | H | layers | B | T | steps | ecornn strategy | torch ms/step "
             "| ecornn ms/step | speedup | torch loss | ecornn loss | same |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        head = f"| {r['dtype']} | {r['hidden']} | {r['layers']} | {r['batch']} | {r['seq_len']} " \
               f"| {r['steps']} | {r['ecornn_strategy']} "
        if "skipped" in r:
            lines.append(head + f"| skipped: {r['skipped']} | | | | | |")
            continue
        t, e = r["torch"], r["ecornn"]
        speedup = r.get("speedup", 0)
        lines.append(head + f"| {t['step_ms']:.2f} | {e['step_ms']:.2f} | {speedup:.2f} "
                            f"| {t['final_loss']:.4f} | {e['final_loss']:.4f} "
                            f"| {'yes' if r['same_loss_within_noise'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="folder for bench_torch_train.{json,md}")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--dtypes", default="float32,bfloat16",
                   help="comma-separated: float32,bfloat16,float16")
    p.add_argument("--strategy", default="auto",
                   choices=["auto", "reference", "fused", "persistent"])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batches", default="8,32", help="comma-separated batch sizes")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--corpus-chars", type=int, default=200_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--strict-fp32", action="store_true", help="turn TF32 off in cuDNN and matmuls")
    p.add_argument("--allow-reference", action="store_true",
                   help="on CUDA, run even when only the host reference engine is feasible")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.strict_fp32:
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    cases = [(d.strip(), int(b)) for d in args.dtypes.split(",") for b in args.batches.split(",")]
    for dtype_name, batch in cases:
        try:
            records.append(compare(args, dtype_name, batch))
        except Exception as exc:  # record it and go on with the next case
            records.append({"dtype": dtype_name, "hidden": args.hidden, "layers": args.layers,
                            "batch": batch, "seq_len": args.seq_len, "steps": args.steps,
                            "ecornn_strategy": args.strategy,
                            "skipped": f"{type(exc).__name__}: {exc}"[:500]})
        print(json.dumps({k: v for k, v in records[-1].items()
                          if k not in ("torch", "ecornn")}), flush=True)
    env = environment(args.device)
    result = json.dumps({"env": env, "records": records}, indent=1)
    (out / "bench_torch_train.json").write_text(result)
    table = markdown(env, records)
    (out / "bench_torch_train.md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
