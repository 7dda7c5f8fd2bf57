"""Diagnosis: per call (eager+capture, replay, replay), per output, the relative error vs float64 of
training forward+backward in each execution mode. Run on the device from the repo root; it found
the GEMMs landing on CuPy's current stream (see notes_fused.md, v0)."""
import sys

import numpy as np

sys.path.insert(0, ".")
from tests.test_fused_gpu import _host, _reference, _to_gpu, _to_host64  # noqa: E402
from tests.helpers import rel_err  # noqa: E402

from ecornn import LSTMConfig  # noqa: E402
from ecornn import gpu_blas  # noqa: E402
from ecornn.engines import fused  # noqa: E402
from ecornn.weights import LayerWeights, init_weights  # noqa: E402

MODES = {"eager": dict(graph=False), "graph": {}, "graph1stream": dict(wavefront=False, second_stream=False)}
CFGS = {"A": dict(input_size=128, hidden_size=128, batch=16, seq_len=40),
        "B": dict(input_size=24, hidden_size=40, num_layers=2, bidirectional=True, batch=6, seq_len=10)}


def errors(cfg, rng, calls=3):
    weights = init_weights(cfg, seed=5)
    w_gpu = [LayerWeights(*(_to_gpu(a, cfg.dtype) for a in w)) for w in weights]
    out = []
    for _ in range(calls):
        x, h0, c0 = (_host(rng, s, cfg.dtype) for s in ((cfg.seq_len, cfg.batch, cfg.input_size),
                                                         cfg.state_shape, cfg.state_shape))
        shape = (cfg.seq_len, cfg.batch, cfg.num_directions * cfg.hidden_size)
        dy, dh, dc = (_host(rng, s, cfg.dtype) for s in (shape, cfg.state_shape, cfg.state_shape))
        want, gw = _reference(cfg, weights, x, h0, c0, dy, dh, dc)
        y, ht, ct, res = fused.forward(cfg, _to_gpu(x, cfg.dtype), w_gpu, _to_gpu(h0, cfg.dtype),
                                       _to_gpu(c0, cfg.dtype), training=True)
        g = fused.backward(res, _to_gpu(dy, cfg.dtype), _to_gpu(dh, cfg.dtype), _to_gpu(dc, cfg.dtype))
        errs = {n: rel_err(np.nan_to_num(_to_host64(a, cfg.dtype), nan=1e9), r) for n, a, r in
                zip(("y", "hT", "cT", "dx", "dh0", "dc0"), (y, ht, ct) + tuple(g[:3]), tuple(want) + tuple(gw[:3]))}
        for i, (a, r) in enumerate(zip(g[3], gw[3])):
            for f, av, rv in zip(a._fields, a, r):
                errs[f"{f}{i}"] = rel_err(np.nan_to_num(_to_host64(av, cfg.dtype), nan=1e9), rv)
        out.append(" ".join(f"{k}={v:.0e}" for k, v in errs.items() if v > 1e-5) or "ok")
    return out


rng = np.random.default_rng(0)
import os
only = os.environ.get("DIAG_MODES")
for cname, sizes in CFGS.items():
    for mode, flags in MODES.items():
        if only and mode not in only.split(","):
            continue
        with fused.using(poison=True, **flags):
            try:
                res = errors(LSTMConfig(**sizes), rng)
            except Exception as exc:  # noqa: BLE001
                res = [f"EXC {type(exc).__name__}: {exc}"[:200]]
        fused.clear_cache()
        print(f"{cname} {mode:18s}", " | ".join(res), flush=True)
print("cublas", gpu_blas.workspace_status())
