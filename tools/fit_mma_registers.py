"""How many k-tiles of the tensor-core kernel's weights fit in registers without spills, per plan:
the capacity model's pick (v19; and the v4 model's) next to the largest spill-free REG_K_TILES the
compiler finds. --compiler nvcc (CPU, sm_90 and sm_80, whole-program) or nvrtc (on the GPU: the
engine's own build, NVRTC + cooperative linking, whose ptxas needs more registers than nvcc's at
the same REG_K_TILES). The data behind persistent_capacity.MMA_REG_OVERHEAD_V19.

    python tools/fit_mma_registers.py [OUT.json] [--compiler nvcc|nvrtc] [--jobs N]
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ecornn.engines import persistent_capacity as cap  # noqa: E402

KERNEL = ROOT / "kernels" / "persistent_mma.cu"
NVCC_ARCHS = ("sm_90", "sm_80")
SPILL = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")

# (pass, dtype, hidden, batch): the cells and the capacity edges of both passes
CASES = [("forward", "bfloat16", 1024, 4), ("forward", "float16", 1024, 8), ("forward", "float16", 1024, 16),
         ("forward", "bfloat16", 2048, 4), ("forward", "float16", 1536, 16), ("forward", "float16", 1920, 8),
         ("forward", "float32", 1024, 4), ("forward", "float32", 1024, 8), ("forward", "float32", 1536, 4),
         ("backward", "float16", 1024, 8), ("backward", "float16", 1024, 16), ("backward", "bfloat16", 1024, 4),
         ("backward", "bfloat16", 2048, 4), ("backward", "float16", 1344, 16), ("backward", "float16", 1792, 8),
         ("backward", "float16", 512, 16), ("backward", "bfloat16", 1536, 4),
         ("forward", "float16", 2048, 1), ("forward", "float16", 2048, 2), ("forward", "float16", 1536, 4),
         ("forward", "float16", 1536, 8), ("forward", "bfloat16", 1792, 4), ("forward", "float16", 1280, 16),
         ("forward", "float32", 1280, 8), ("forward", "float32", 1280, 4), ("forward", "float32", 1024, 16),
         ("forward", "float16", 2112, 4), ("backward", "float16", 2112, 4),
         ("backward", "float16", 1280, 4), ("backward", "float16", 1280, 8), ("backward", "float16", 1280, 16),
         ("backward", "float16", 1536, 8), ("backward", "float16", 2048, 1), ("backward", "float16", 768, 16)]


def build_nvcc(defines: dict, arch: str) -> tuple:
    """(registers, spill bytes) of one nvcc compile."""
    flags = [f"-D{k}={v}" for k, v in defines.items()]
    done = subprocess.run(["nvcc", f"-arch={arch}", "-std=c++17", "-Xptxas", "-v", "-cubin", "-o", "/dev/null",
                           *flags, str(KERNEL)], capture_output=True, text=True, cwd=KERNEL.parent, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return int(REGS.findall(done.stderr)[-1]), sum(int(s) + int(l) for s, l in SPILL.findall(done.stderr))


def build_nvrtc(defines: dict, arch: str = "device") -> tuple:
    """(registers, local bytes) of the engine's own build (ecornn.gpu.compile_module, cooperative)."""
    from ecornn.gpu import compile_module
    function = "persistent_lstm_fwd" if defines["PASS"] == 0 else "persistent_lstm_bwd"
    kern = compile_module("persistent_mma.cu", defines, cooperative=True).get_function(function)
    return kern.num_regs, kern.local_size_bytes


def plan_of(case):
    pass_name, dtype, hidden, batch = case
    props = cap.h100_properties()
    plan = cap.plan_mma(props, pass_name, hidden, batch, dtype=dtype)
    try:
        v4 = cap.plan_mma(props, pass_name, hidden, batch, dtype=dtype, reg_model="v4")
    except cap.NotSupported:
        v4 = None
    return cap.with_poll_delay(plan) if pass_name == "forward" else plan, v4


def row(case, builds: dict) -> dict:
    """The case's plans and, per compiler target, the largest REG_K_TILES up to which every build
    from the lowest tried is spill-free (with its registers)."""
    plan, v4 = plan_of(case)
    out = {"pass": case[0], "dtype": case[1], "hidden": case[2], "batch": case[3], "warps": plan.warps,
           "units": plan.units, "m_tiles": plan.m_tiles, "k_tiles": plan.k_tiles,
           "model_reg_k_tiles": plan.reg_k_tiles, "model_v4_reg_k_tiles": v4 and v4.reg_k_tiles,
           "model_regs": plan.regs_per_thread}
    for target in sorted({t for (c, t, _) in builds if c == case}):
        tried = sorted((reg, res) for (c, t, reg), res in builds.items() if c == case and t == target)
        best = None
        for reg, (regs, spills) in tried:
            if spills:
                break
            best = (reg, regs)
        out[f"{target}_reg_k_tiles"], out[f"{target}_regs"] = best if best else (None, None)
        out[f"{target}_tried"] = {reg: list(res) for reg, res in tried}
    return out


def _one(job):
    case, target, reg, compiler = job
    plan, _ = plan_of(case)
    defines = replace(plan, reg_k_tiles=reg).defines()
    return job[:3], (build_nvrtc(defines) if compiler == "nvrtc" else build_nvcc(defines, target))


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    targets = NVCC_ARCHS if args.compiler == "nvcc" else ("nvrtc",)
    jobs = []
    for case in CASES:
        try:
            plan, v4 = plan_of(case)
        except cap.NotSupported as exc:
            print(f"skipped {case}: {exc.reason}", file=sys.stderr)
            continue
        low = min(plan.reg_k_tiles, v4.reg_k_tiles if v4 else plan.reg_k_tiles)
        low = max(0, low - 2)
        jobs += [(case, t, reg, args.compiler) for t in targets for reg in range(low, plan.k_tiles + 1)]
    pool = (ProcessPoolExecutor if args.compiler == "nvrtc" else ThreadPoolExecutor)(args.jobs)
    with pool:
        builds = dict(pool.map(_one, jobs))
    rows = [row(case, builds) for case in CASES if any(c == case for (c, _, _) in builds)]
    report(rows, args.out)


def parse_args(description: str):
    """OUT.json (optional), --compiler nvcc|nvrtc, --jobs N (shared with fit_cluster_registers.py)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--compiler", choices=("nvcc", "nvrtc"), default="nvcc")
    parser.add_argument("--jobs", type=int, default=2)
    return parser.parse_args()


def report(rows: list, out) -> None:
    """The rows as a markdown table (without their "*tried" builds), and all of them as JSON to ``out``."""
    keys = [k for k in rows[0] if not k.endswith("tried")]
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r.get(k)) for k in keys) + " |")
    if out:
        out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
