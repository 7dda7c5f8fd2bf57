"""v45: how many k-tiles of the clustered fp32 split forward (v42-v44) fit in registers without spills, per tile shape:
the register model's pick (capacity.with_cluster_k) next to the largest spill-free REG_K_TILES the compiler finds,
for every clustered shape "auto" plans on the H200 (fp32, H=512-2048, B=1-64, inference and training forwards).
--compiler nvcc (CPU, sm_90: clusters need it) or nvrtc (on the GPU: the engine's own build). The data behind
persistent_capacity.MMA_CLUSTER_REG_OVERHEAD.

    python tools/fit_cluster_registers.py [OUT.json] [--compiler nvcc|nvrtc] [--jobs N]
"""
from __future__ import annotations

import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from ecornn import NotSupported  # noqa: E402
from ecornn.config import LSTMConfig  # noqa: E402
from ecornn.devices import KNOWN  # noqa: E402
from ecornn.engines import persistent  # noqa: E402
from fit_mma_registers import build_nvcc, build_nvrtc, parse_args, report  # noqa: E402

HIDDEN = range(512, 2049, 128)
BATCHES = (*range(1, 17), 24, 32, 48, 64)


def clustered_plans(device: str = "h200") -> dict:
    """{tile shape: (the first (H, B) planned with it, its plan with every k-tile in registers)} over the grid."""
    saved = persistent._props
    persistent._props = KNOWN[device].as_dict
    shapes = {}
    try:
        for hidden in HIDDEN:
            for batch in BATCHES:
                for training in (False, True):
                    try:
                        plan = persistent.plans_for(LSTMConfig(hidden, hidden, 1, False, "float32", batch, 256),
                                                    training)["forward"]
                    except NotSupported:
                        continue
                    if getattr(plan, "cluster_k", 1) > 1:
                        full = replace(plan, reg_k_tiles=plan.k_tiles)
                        d = full.defines()
                        key = tuple(d.get(k, 1) for k in ("BATCH", "NWARPS", "M_TILES", "K_TILES", "GROUPS"))
                        shapes.setdefault(key, ((hidden, batch), plan, full))
    finally:
        persistent._props = saved
    return shapes


def largest_spill_free(full, compiler: str) -> dict:
    """REG_K_TILES from all down to 0 until a build is spill-free: {reg_k_tiles: (registers, spill bytes)}."""
    tried = {}
    for reg in range(full.k_tiles, -1, -1):
        defines = replace(full, reg_k_tiles=reg).defines()
        tried[reg] = build_nvrtc(defines) if compiler == "nvrtc" else build_nvcc(defines, "sm_90")
        if tried[reg][1] == 0:
            break
    return tried


def _one(args):
    key, full, compiler = args
    return key, largest_spill_free(full, compiler)


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    shapes = clustered_plans()
    pool = (ProcessPoolExecutor if args.compiler == "nvrtc" else ThreadPoolExecutor)(args.jobs)
    with pool:
        found = dict(pool.map(_one, [(key, full, args.compiler) for key, (_, _, full) in shapes.items()]))
    rows = []
    for key, ((hidden, batch), plan, full) in shapes.items():
        tried = found[key]
        fits = [reg for reg, (_, spills) in tried.items() if spills == 0]
        rows.append({"hidden": hidden, "batch": batch, "tile_batch": key[0], "warps": key[1], "m_tiles": key[2],
                     "k_tiles": key[3], "groups": key[4], "model_reg_k_tiles": plan.reg_k_tiles,
                     f"{args.compiler}_reg_k_tiles": max(fits) if fits else None,
                     f"{args.compiler}_regs": tried[max(fits)][0] if fits else None,
                     "tried": {reg: list(res) for reg, res in tried.items()}})
    report(rows, args.out)


if __name__ == "__main__":
    main()
