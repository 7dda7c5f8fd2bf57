"""v19 benchmark: the tensor-core plans of the refitted register model (capacity.MMA_REG_OVERHEAD_V19:
more k-tiles in registers, the same warps and units wherever the v4 geometry still fits) against the v4
model's plans (REGISTER_MODEL="v4", the ablation), cuDNN in the same process (torch.nn.LSTM, PyTorch
defaults). Per row (T=256, 1 layer, input=hidden, random non-zero inputs, CUDA events, median): both
modes' forward and backward plans, the whole forward (graph replay), the forward kernel alone and
fwd+bwd ms; the ratios to cuDNN are v19's.

    python benchmarks/bench_persistent_v19.py OUT_DIR [--repeats N] [--rows N] [--start K] [--name NAME] [--v19-first]
Writes OUT_DIR/NAME.{json,md} (NAME: persistent_v19_bench) and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
from bench_persistent import _problem, ab_bench_main, measured_row, pair_table  # noqa: E402

from ecornn.engines import persistent  # noqa: E402

ROWS = [("bfloat16", 2048, 4), ("float16", 1024, 8), ("bfloat16", 1024, 4), ("float16", 2048, 4),
        ("float16", 1920, 8), ("float32", 1536, 4), ("float32", 1280, 8),
        ("float16", 1024, 16)]   # the control: the same plans in both modes
MODES = {"v19": {}, "v4": {"REGISTER_MODEL": "v4"}}


def backward_plan(config, mode, out):
    """The mode's backward plan as built (its fwd+bwd ran under it)."""
    out[f"{mode}_backward_plan"] = persistent._final(persistent.plans_for(config, True)["backward"]).describe()


def measure(dtype, hidden, batch, repeats, v19_first=False):
    """Both modes; "v4" is timed first (measure_modes' reverse name order) unless v19_first."""
    problem = _problem(dtype, hidden, batch, seed=hidden + batch)
    return ab_modes.measure_modes(problem, MODES, repeats, other_first=v19_first,
                                  extra=lambda mode, out: backward_plan(problem[0], mode, out))


def row(dtype, hidden, batch, repeats, v19_first=False):
    return measured_row(measure, dtype, hidden, batch, repeats, v19_first)


def markdown(rows):
    table = pair_table(rows, "v19", "v4", ("v19", "v4"))
    plans = ["", "Plans (forward; backward):"] + [
        f"- {r['dtype']} H={r['hidden']} B={r['batch']}: v19 {r.get('v19_plan')}; {r.get('v19_backward_plan')} "
        f"| v4 {r.get('v4_plan')}; {r.get('v4_backward_plan')}" for r in rows]
    return table + "\n".join(plans)


def main(argv=None):
    ab_bench_main(argv, ROWS, row, markdown, "persistent_v19_bench", "--v19-first",
                  "time the v19 mode first (order bias check)")


if __name__ == "__main__":
    main()
