"""v52: training (forward + backward, ms per call) with the forward's W_ih k-tiles in registers against the rule's
training plans (none), alternated over rounds in one process (ab_modes.alternate_rounds; fresh prepared weights per
mode and round, the training graphs replayed as the quick bench's fwd+bwd). ``--set v55``: the fp32 H=1024 B=4
training forward with and without v55's repoll backoff (rules.poll_backoff_ns) instead; ``--set v58``: the fp32
backwards that NVRTC spills by a few registers, backed off one column at a time against v57's 8.

    python benchmarks/ab_train_v52.py OUT_DIR [--rounds N] [--repeats N] [--set v52|v55]
Writes OUT_DIR/ab_train_{set}.{json,md} and prints the table.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
import bench_persistent as bp  # noqa: E402
from bench_persistent_v5 import _train_ms  # noqa: E402

from ecornn.engines import persistent  # noqa: E402

ROWS = [("float16", 1024, 16), ("bfloat16", 1024, 16), ("float16", 1024, 12), ("bfloat16", 1024, 4),
        ("float16", 1024, 4), ("float16", 1024, 8)]
MODES = {"training forward as the rule (none)": {}, "2 W_ih k-tiles in registers": {"INPUT_REG_K_TILES": 2}}
SETS = {"v52": (ROWS, MODES),
        "v55": ([("float32", 1024, 4)], {"the rule (repolls after 100 ns)": {}, "no backoff": {"POLL_BACKOFF_NS": 0}}),
        "v58": ([("float32", 1024, 8), ("float32", 512, 16), ("float32", 768, 3)],
                {"v58 (a near miss moves 1 column)": {}, "v57 (8 columns a retry)": {"FINE_BACKOFF_BYTES": 0}}),
        "v58-groups": ([("float32", 512, 24)],   # 12 groups at 64 columns against v57's fallback to 6 groups
                       {"v58 (a near miss moves 1 column)": {}, "v57 (8 columns a retry)": {"FINE_BACKOFF_BYTES": 0}})}


def measure_cell(cell, rounds: int, repeats: int, modes=MODES) -> dict:
    config, weights, x, h0, c0 = bp._problem(*cell, seed=cell[1] + cell[2])

    def measure():
        prepared = persistent.prepare(config, weights)
        train_ms = _train_ms(config, weights, x, h0, c0, prepared, repeats)
        built = persistent.built_plans(config, True)   # after any fallback
        plans = {k: persistent._final(p) for k, p in built.items() if k in ("forward", "backward")}
        # the forward's W_ih register k-tiles (v52) / the backward's register tiles (v58), as built
        return {"train_ms": train_ms, "reg_k_tiles": f"{getattr(plans['forward'], 'input_reg_k_tiles', 0)}/"
                                                      f"{persistent._register_tiles(plans['backward'])}"
                                                      f" in {plans['backward'].batch_groups} groups"}
    return ab_modes.alternate_rounds(modes, rounds, measure)


def markdown(rows, modes=MODES) -> str:
    names = list(modes)
    lines = ["| dtype | H | B | " + " | ".join(f"fwd+bwd ms, {m} (median; rounds; register tiles: forward W_ih / backward)" for m in names)
             + " |", "|---|---|---|" + "---|" * len(names)]
    for r in rows:
        cells = [f"{np.median(r[m]['train_ms']):.3f} ({', '.join(f'{v:.3f}' for v in r[m]['train_ms'])}; "
                 f"{r[m]['reg_k_tiles'][0]})" for m in names]
        lines.append(f"| {r['dtype']} | {r['hidden']} | {r['batch']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    args, out = bp.bench_args(argv, repeats=10, configure=lambda p: (
        p.add_argument("--rounds", type=int, default=4), p.add_argument("--set", choices=sorted(SETS), default="v52")))
    cells, modes = SETS[args.set]
    rows = []
    for cell in cells:
        rows.append({"dtype": cell[0], "hidden": cell[1], "batch": cell[2],
                     **measure_cell(cell, args.rounds, args.repeats, modes)})
        bp.save_rows(out, f"ab_train_{args.set}", bp.bench_meta(), rows, markdown(rows, modes))
    print(markdown(rows, modes))


if __name__ == "__main__":
    main()
