"""v16 benchmark: tagged forwards at B <= 2 with the first poll's delay (rules.poll_delay_pays)
against none (POLL_DELAY=False, the ablation), cuDNN in the same process (torch.nn.LSTM, PyTorch
defaults). Per row (T=256, 1 layer, input=hidden, random non-zero inputs, CUDA events, median): the
whole forward (graph replay), the forward kernel alone and fwd+bwd ms in either mode (the backward
is the same), cuDNN's forward µs/step and fwd+bwd ms; the ratios to cuDNN are the delay's. The
bf16 H=2048 B=2 row is the cell the rule leaves out since (POLL_DELAY_MAX_HIDDEN): both modes run
without the delay there now.

    python benchmarks/bench_persistent_v16.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--delay-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v16_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import _problem, ab_bench_main, measured_row, pair_table  # noqa: E402

ROWS = [("float32", 512, 1), ("float32", 512, 2), ("float32", 768, 2), ("float32", 1024, 1),
        ("float16", 1024, 1), ("float16", 1024, 2), ("bfloat16", 1024, 1), ("bfloat16", 2048, 2)]
MODES = {"delay": {}, "no_delay": {"POLL_DELAY": False}}


def measure(dtype, hidden, batch, repeats, delay_first=False):
    """Both modes; "no_delay" is timed first (measure_modes' reverse name order) unless delay_first."""
    problem = _problem(dtype, hidden, batch, seed=hidden + batch)
    return ab_modes.measure_modes(problem, MODES, repeats, other_first=delay_first)


def row(dtype, hidden, batch, repeats, delay_first=False):
    return measured_row(measure, dtype, hidden, batch, repeats, delay_first)


def markdown(rows):
    return pair_table(rows, "delay", "no_delay", ("delay", "no delay"))


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v16_bench", "--delay-first",
                  "time the delay mode first (order bias check)")


if __name__ == "__main__":
    main()
