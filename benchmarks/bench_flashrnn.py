"""FlashRNN (PyPI `flashrnn`, a peer that compiles its CUDA through torch) vs ecornn vs cuDNN.

One LSTM layer, T=256, one head (head dim = H). FlashRNN takes pre-computed input projections, so
its timed region includes the input GEMM (torch) to compare whole layers. Each FlashRNN config is
compiled on first use (that can take minutes): the script gives up on a config after --budget-s.
Usage: python benchmarks/bench_flashrnn.py OUT_DIR
"""
import json
import sys
import time
import traceback

import cupy
import torch

import ecornn
from ecornn.baselines import median_cuda_us, time_torch_lstm
from ecornn.run import time_config

CONFIGS = [(768, 16, "bfloat16"), (1024, 8, "bfloat16"), (1024, 4, "bfloat16")]
T = 256


def time_flashrnn(hidden, batch, dtype, iterations=20):
    from flashrnn import flashrnn
    tdtype = getattr(torch, dtype)
    x = torch.randn(batch, T, hidden, device="cuda", dtype=tdtype)
    w_ih = torch.randn(4 * hidden, hidden, device="cuda", dtype=tdtype) / hidden ** 0.5
    r = torch.randn(4, 1, hidden, hidden, device="cuda", dtype=tdtype) / hidden ** 0.5
    b = torch.randn(4, 1, hidden, device="cuda", dtype=tdtype)

    def once():
        wx = (x @ w_ih.T).view(batch, T, 4, 1, hidden)
        return flashrnn(wx, r, b, function="lstm", backend="cuda_fused", dtype=dtype)

    with torch.no_grad():
        return median_cuda_us(once, iterations, warmup=2) / T


def main(out_dir):
    rows = []
    for hidden, batch, dtype in CONFIGS:
        config = ecornn.LSTMConfig(hidden, hidden, dtype=dtype, batch=batch, seq_len=T)
        row = {"hidden": hidden, "batch": batch, "dtype": dtype, "T": T}
        start = time.time()
        try:
            row["flashrnn_us"] = time_flashrnn(hidden, batch, dtype)
        except Exception as exc:
            row["flashrnn_error"] = f"{type(exc).__name__}: {exc}"[:400]
            traceback.print_exc()
        row["flashrnn_first_call_s"] = time.time() - start
        try:
            result = time_config(config, "auto", 20, False, xp=cupy, progress=False)
            row["ecornn_us"], row["ecornn_strategy"] = result["us_per_step"], result["strategy"]
        except Exception as exc:
            row["ecornn_error"] = f"{type(exc).__name__}: {exc}"[:400]
        row["cudnn_us"] = time_torch_lstm(config, False)
        rows.append(row)
        print(json.dumps(row), flush=True)
        _save(out_dir, rows)  # after every row: FlashRNN's first call compiles for ~1 min


def _save(out_dir, rows):
    meta = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "cupy": cupy.__version__}
    with open(f"{out_dir}/flashrnn_compare.json", "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=2)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
