"""v61 probe: would Hopper's warpgroup MMA (wgmma) shorten a persistent step's products?

fp16 H=1024 B=16 (grouped) runs per step, per block, two 64 x 8 x 1024 products by mma.sync.m16n8k16 on 8 warps: the
recurrent one with A (W_hh) in registers and the input one with most of A (W_ih) read from shared memory (ldmatrix).
v51/v54b found the input product's k-tiles on every block's loop (half of them off: ~-0.25 µs/step), while moving two
more of them into registers (v52: fewer shared-memory reads, the same mma) gained nothing: the mma work itself costs.
wgmma.mma_async (sm_90a) runs a 64-row tile per warpgroup from registers or straight from shared memory. This probe
times one block's product per step (its partial sums through shared memory included) both ways, on every SM at once,
and checks each result against float64 (`probe_wgmma_v61.cu` has the four variants). nvcc builds it for sm_90a (CuPy's
NVRTC builds add their own -arch, so cannot), and CuPy loads the cubin.

    python benchmarks/probe_wgmma_v61.py OUT_DIR [--steps N] [--rounds R]
Writes OUT_DIR/probe_wgmma_v61.{json,md}.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import bench_args, bench_meta, save_rows  # noqa: E402

SOURCE = Path(__file__).with_name("probe_wgmma_v61.cu")
ROWS, COLS, K = 64, 8, 1024
VARIANTS = {0: "mma.sync, A in registers", 1: "mma.sync, A by ldmatrix", 2: "wgmma, A in registers",
            3: "wgmma, A in shared memory", 4: "wgmma, A in registers, 4 chains",
            5: "wgmma, A in shared memory, 4 chains", 6: "mma.sync, A as the kernels' shared-memory tiles"}


def build(arch: str = "sm_90a") -> str:
    """The probe's cubin (nvcc), in a temporary directory."""
    cubin = Path(tempfile.mkdtemp()) / "probe_wgmma_v61.cubin"
    subprocess.run(["nvcc", f"-arch={arch}", "-cubin", "-O3", "-o", str(cubin), str(SOURCE)], check=True)
    return str(cubin)


def shared_bytes(variant: int) -> int:
    partial, pad = 8 * ROWS * COLS * 4, 8
    wgmma = 2 <= variant <= 5
    x = 2 * (K * COLS if wgmma else COLS * (K + pad))
    a = {1: 2 * ROWS * (K + pad), 3: 2 * ROWS * K, 5: 2 * ROWS * K, 6: 2 * ROWS * K}.get(variant, 0)
    slack = 16384 if wgmma else 0   # a swapped descriptor's reads stay inside the allocation
    return partial + x + a + slack


def run_variant(cp, module, variant: int, swap: int, a, x, steps: int, blocks: int) -> dict:
    fn = module.get_function(f"_Z13product_stepsILi{variant}EEvPKjS1_PfPxii")
    smem = shared_bytes(variant)
    fn.max_dynamic_shared_size_bytes = smem
    out = cp.zeros(ROWS * COLS, cp.float32)
    cycles = cp.zeros(blocks, cp.int64)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    args = (a, x, out, cycles, np.int32(steps), np.int32(swap))
    fn((blocks,), (256,), args, shared_mem=smem)   # warm-up
    start.record()
    fn((blocks,), (256,), args, shared_mem=smem)
    end.record()
    end.synchronize()
    ms = cp.cuda.get_elapsed_time(start, end)
    return {"ns_per_step": ms * 1e6 / steps, "cycles_per_step": float(np.median(cp.asnumpy(cycles))) / steps,
            "out": cp.asnumpy(out).reshape(ROWS, COLS)}


def cell_rows(steps: int, rounds: int) -> list:
    import cupy as cp
    blocks = cp.cuda.Device().attributes["MultiProcessorCount"]
    module = cp.RawModule(path=build())
    rng = np.random.default_rng()
    a16 = (rng.standard_normal((ROWS, K)) * 0.05).astype(np.float16)
    x16 = rng.standard_normal((COLS, K)).astype(np.float16)
    want = a16.astype(np.float64) @ x16.astype(np.float64).T
    a = cp.asarray(a16.view(np.uint32).ravel())
    x = cp.asarray(x16.view(np.uint32).ravel())
    rows = []
    for variant, name in VARIANTS.items():
        for swap in ((0, 1) if variant in (2, 3) else (0,)):   # 1: the offsets the other way (v61 call 4: wrong)
            runs = [run_variant(cp, module, variant, swap, a, x, steps, blocks) for _ in range(rounds)]
            err = float(np.abs(runs[-1]["out"] - want).max() / np.abs(want).max())
            rows.append({"variant": variant, "name": name, "swap": swap, "blocks": blocks, "steps": steps,
                         "ns_per_step": [r["ns_per_step"] for r in runs],
                         "cycles_per_step": [r["cycles_per_step"] for r in runs], "rel_err": err})
    return rows


def markdown(rows) -> str:
    lines = ["| variant | descriptors swapped | ns per step (median of rounds) | SM cycles per step | max rel. error vs "
             "float64 |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['swap'] if 2 <= r['variant'] <= 5 else '-'} | {np.median(r['ns_per_step']):.1f} | "
                     f"{np.median(r['cycles_per_step']):.0f} | {r['rel_err']:.1e} |")
    return "\n".join(lines)


def main(argv=None):
    def setup(parser):
        parser.add_argument("--steps", type=int, default=20000)
        parser.add_argument("--rounds", type=int, default=3)
    args, out = bench_args(argv, repeats=1, configure=setup)
    rows = cell_rows(args.steps, args.rounds)
    text = markdown(rows)
    print(text)
    save_rows(out, "probe_wgmma_v61", bench_meta(), rows, text)


if __name__ == "__main__":
    main()
