"""v36: long fp32 reductions in chunks (LONG_REDUCTIONS="chunked") against v35's strict SGEMM ("strict") and one
tensor-core GEMM over the whole reduction ("one GEMM", the thresholds off): the gradients' and the forward's error
against float64 (norm-wise relative, the worst of dx, dW_ih, dW_hh / of y; one draw per cell) and the time, the modes
alternated over rounds in one process: fwd+bwd ms (T=256, input = hidden) for the backward's cells, the forward
µs/step by graph replay for the projection's (8192 inputs).

    python benchmarks/bench_chunked_v36.py OUT_DIR [--rounds N] [--repeats N]
Writes OUT_DIR/bench_chunked_v36.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import STEPS, bench_args, bench_meta, save_rows, training_call  # noqa: E402

TRAIN_CELLS = [(1536, 4), (1024, 8), (1024, 4), (1024, 16)]    # (H, B): dX over 4H >= 4096; T B = 4096 at B=16
PROJECTION_CELLS = [(8192, 512, 4), (8192, 1024, 8)]             # (inputs, H, B), T = 256
MODES = {"chunked": {}, "strict": {"LONG_REDUCTIONS": "strict"},
         "one GEMM": {"FP32_LONG_REDUCTION_FROM_K": None, "FP32_PROJECTION_LONG_FROM_K": None}}


def _rel(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


def _problem(inp, hidden, batch):
    from ecornn import LSTMConfig, init_weights
    config = LSTMConfig(inp, hidden, 1, False, "float32", batch, STEPS)
    rng = np.random.default_rng(inp + hidden + batch)
    shapes = (config.input_shape, config.state_shape, config.state_shape, config.output_shape, config.state_shape,
              config.state_shape)
    return config, init_weights(config, seed=hidden), [rng.standard_normal(s).astype(np.float32) for s in shapes]


def errors(inp, hidden, batch, training: bool, modes=None) -> dict:
    """{mode: the worst error of the gradients (training) or of y} against float64, under ``modes`` (MODES)."""
    from ecornn import LayerWeights, lstm_backward, lstm_forward
    _, weights, (x, h0, c0, dy, dh, dc) = _problem(inp, hidden, batch)
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    ref = lstm_forward(f64(x), [LayerWeights(*map(f64, w)) for w in weights], f64(h0), f64(c0),
                       strategy="reference", training=training)
    want = _outputs(ref, lstm_backward(ref.reserve, f64(dy), f64(dh), f64(dc)) if training else None)
    worst = {}
    for mode, flags in (modes or MODES).items():
        ab_modes.set_engine_flags(flags)
        try:
            out = lstm_forward(x, weights, h0, c0, strategy="persistent", training=training)
            got = _outputs(out, lstm_backward(out.reserve, dy, dh, dc) if training else None)
            worst[mode] = max(_rel(g, w) for g, w in zip(got, want))
        finally:
            ab_modes.set_engine_flags({})
    return worst


def _outputs(out, grads):
    if grads is None:
        return [out.y]
    return [grads.dx, grads.dweights[0].w_ih, grads.dweights[0].w_hh]


def forward_call(inp, hidden, batch):
    import cupy as cp
    from ecornn.engines import persistent
    config, weights, (x, h0, c0, *_) = _problem(inp, hidden, batch)
    gpu = [type(w)(*(cp.asarray(a) for a in w)) for w in weights]
    x, h0, c0 = cp.asarray(x), cp.asarray(h0), cp.asarray(c0)
    prepared = persistent.prepare(config, gpu)
    return lambda: persistent.forward(config, x, gpu, h0, c0, prepared=prepared)


def markdown(rows, modes=None) -> str:
    return ab_modes.error_time_table(rows, modes or MODES, {"cell": "cell", "what": "what"}, "error", "time", "error",
                                     "time")


def measure_cells(argv, name: str, modes: dict, train_cells, projection_cells, rounds: int) -> None:
    """The bench: per training cell (H, B) the gradients' errors and fwd+bwd ms, per projection cell (inputs, H, B)
    y's error and the forward's µs/step, under ``modes``; saved as OUT_DIR/<name>.{json,md} after every cell."""
    args, out = bench_args(argv, repeats=10, configure=lambda p: p.add_argument("--rounds", type=int, default=rounds))
    rows = []
    cells = [(hidden, hidden, batch, True) for hidden, batch in train_cells]
    cells += [(inp, hidden, batch, False) for inp, hidden, batch in projection_cells]
    for inp, hidden, batch, training in cells:
        error = errors(inp, hidden, batch, training, modes)   # first, as in the recorded runs
        if training:
            rows.append({"cell": f"H={hidden} B={batch}", "what": "fwd+bwd ms; grads", "error": error,
                         "time": ab_modes.alternate_calls(
                             modes, lambda: training_call("float32", hidden, batch, seed=hidden + batch)[0],
                             args.rounds, args.repeats)})
        else:
            rows.append({"cell": f"in={inp} H={hidden} B={batch}", "what": "forward us/step; y", "error": error,
                         "time": ab_modes.alternate_calls(modes, lambda: forward_call(inp, hidden, batch), args.rounds,
                                                          args.repeats, 1e3 / STEPS)})
        save_rows(out, name, bench_meta(), rows, markdown(rows, modes))
    print(markdown(rows, modes))


def main(argv=None):
    measure_cells(argv, "bench_chunked_v36", MODES, TRAIN_CELLS, PROJECTION_CELLS, rounds=4)


if __name__ == "__main__":
    main()
