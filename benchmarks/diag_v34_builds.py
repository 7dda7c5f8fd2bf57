"""v34 diagnostic: each bench_persistent_v34 row's forward plan as planned and as built (after any spill back-off:
fewer register k-tiles) under both modes, so an A/B's kernel-alone gap is not a different build.

    python benchmarks/diag_v34_builds.py OUT_DIR
Writes OUT_DIR/diag_v34_builds.md and prints it."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ab_modes  # noqa: E402
import bench_persistent_v34 as v34  # noqa: E402

from ecornn import LSTMConfig  # noqa: E402
from ecornn.engines import persistent  # noqa: E402


def main(out):
    lines = ["| dtype | H | B | mode | planned reg_k_tiles | built reg_k_tiles | plan |", "|---|---|---|---|---|---|---|"]
    for dtype, hidden, batch in v34.ROWS:
        config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, 256)
        for mode, flags in v34.MODES.items():
            ab_modes.set_engine_flags(flags)
            plan = persistent._plans(config, training=False)["forward"]
            built = persistent._final(plan)
            lines.append(f"| {dtype} | {hidden} | {batch} | {mode} | {plan.reg_k_tiles} | {built.reg_k_tiles} | "
                         f"{built.describe()} |")
    ab_modes.set_engine_flags({})
    text = "\n".join(lines)
    Path(out, "diag_v34_builds.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main(sys.argv[1])
