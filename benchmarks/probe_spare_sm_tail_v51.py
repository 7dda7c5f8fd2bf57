"""v51 probe: can the fp32 split forward's input-projection tail run on the SMs its kernel leaves idle?

fp32 H=1024 B=8 and B=4 run 128 blocks (one per SM) on 132 SMs. v50 (notes, part 5) predicted ~-0.045 us/step
at B=8 if the GEMM rows of the last steps ran on the 4 spare SMs while the kernel runs the first ones. Before
building that into the graph, this probe measures the two things the prediction rests on, with the kernel alone
(bench_persistent.kernel_launcher) on the main stream and the tail GEMM (gpu_blas.matmul_fp16_split3 on the rows
of steps >= S0) on a side stream that first waits ``delay`` us on one block (so the cooperative kernel is resident
first):

- how long the tail takes on the spare SMs (from the kernel's start to the tail's end), against the time the
  kernel needs to reach step S0;
- how much the kernel slows while the tail runs beside it (L2 and HBM traffic), against the kernel alone.

It also times the whole projection GEMM (matmul_fp16_split3) against torch's fp16 GEMM of the same shape
(fp16 out; fp32 out where torch offers it), as a check on cuBLAS's algorithm at these shapes.

Read with care: "tail alone" and the GEMM comparison time single synchronised calls, whose spans include the
host's time before the launch (ours from Python, torch's from C++), so they are host-bound at small M and the "net"
column inherits that. Call 3 (the GEMMs back to back, results/persistent_v51) found no algorithm gap. The tail's end
and the kernel's slowdown beside it are GPU-side and are what notes_persistent.md v51 part 1 uses.

    python benchmarks/probe_spare_sm_tail_v51.py OUT_DIR [--rounds N]
Writes OUT_DIR/probe_spare_sm_tail_v51.{json,md}.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import STEPS, _problem, bench_meta, kernel_launcher  # noqa: E402

CELLS = [("float32", 1024, 8), ("float32", 1024, 4)]
TAIL_FRACTIONS = (0.1, 0.15, 0.2)
DELAYS_US = (5.0, 20.0)

_DELAY_SRC = r"""
extern "C" __global__ void wait_ns(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { __nanosleep(200); asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < ns);
}
"""


def _events(cp, n):
    return [cp.cuda.Event() for _ in range(n)]


def _ms(cp, a, b):
    return cp.cuda.get_elapsed_time(a, b)


def probe_cell(dtype, hidden, batch, rounds):
    import cupy as cp
    from ecornn import gpu_blas
    from ecornn.engines import persistent
    config, weights, x, h0, c0 = _problem(dtype, hidden, batch)
    prepared = persistent.prepare(config, weights)
    plan = persistent._built_plans(persistent.run_config(config), False, "auto")["forward"]
    kernel = kernel_launcher(config, prepared, x, h0, c0, plan)
    flat = x.reshape(STEPS * batch, hidden)
    a3, a_exp = gpu_blas.fp16_split3(flat, False)
    b3, b_exp = prepared.slots[0].input_weight_split16(None)
    out = cp.empty((STEPS * batch, b3.shape[0]), cp.float32)
    main, side = cp.cuda.get_current_stream(), cp.cuda.Stream(non_blocking=True)
    gpu_blas.handle_for(side)
    wait = cp.RawKernel(_DELAY_SRC, "wait_ns")

    def tail(rows0, stream):
        gpu_blas.matmul_fp16_split3(a3[rows0:], a_exp[rows0:], b3, b_exp, out[rows0:], stream=stream, unscale=False)

    def kernel_alone():
        e = _events(cp, 2)
        e[0].record(main); kernel(); e[1].record(main); e[1].synchronize()
        return _ms(cp, e[0], e[1])

    def tail_alone(rows0):
        e = _events(cp, 2)
        e[0].record(main); tail(rows0, main); e[1].record(main); e[1].synchronize()
        return _ms(cp, e[0], e[1])

    def together(rows0, delay_us):
        e = _events(cp, 3)
        e[0].record(main)
        kernel()
        e[1].record(main)
        side.wait_event(e[0])
        wait((1,), (32,), (np.uint64(int(delay_us * 1e3)),), stream=side)
        tail(rows0, side)
        e[2].record(side)
        e[1].synchronize(); e[2].synchronize()
        return _ms(cp, e[0], e[1]), _ms(cp, e[0], e[2])

    for _ in range(3):   # warm: modules, cuBLAS on both streams
        kernel_alone(); tail_alone(0); together(STEPS * batch // 2, 5.0)
    rows = []
    for f in TAIL_FRACTIONS:
        s0 = int(round(STEPS * (1 - f)))
        rows0 = s0 * batch
        for delay in DELAYS_US:
            alone, tail_full, tail_on_side, kern_with = [], [], [], []
            for _ in range(rounds):   # alternated: alone, tail alone, together
                alone.append(kernel_alone())
                tail_full.append(tail_alone(rows0))
                k, t = together(rows0, delay)
                kern_with.append(k); tail_on_side.append(t)
            kernel_ms = float(np.median(alone))
            rows.append(dict(dtype=dtype, hidden=hidden, batch=batch, tail_fraction=f, s0=s0, delay_us=delay,
                             kernel_alone_us=1e3 * kernel_ms, kernel_with_tail_us=1e3 * float(np.median(kern_with)),
                             tail_alone_us=1e3 * float(np.median(tail_full)),
                             tail_done_us=1e3 * float(np.median(tail_on_side)),
                             kernel_at_s0_us=1e3 * kernel_ms * s0 / STEPS,
                             kernel_range_us=[1e3 * min(alone), 1e3 * max(alone)],
                             with_tail_range_us=[1e3 * min(kern_with), 1e3 * max(kern_with)]))
            r = rows[-1]
            r["net_us"] = r["kernel_with_tail_us"] - r["kernel_alone_us"] - r["tail_alone_us"]
            print(json.dumps(r), flush=True)
    full = dict(dtype=dtype, hidden=hidden, batch=batch, gemm=_gemm_times(a3, b3, out, main, rounds))
    print(json.dumps(full), flush=True)
    return rows, full


def _gemm_times(a3, b3, out, stream, rounds):
    """The whole projection GEMM (ours) against torch's fp16 GEMM of the same shape, us (median)."""
    import cupy as cp
    import torch
    from ecornn import gpu_blas
    m, k = a3.shape
    n = b3.shape[0]
    flops = 2.0 * m * n * k
    a_t, b_t = torch.from_dlpack(a3), torch.from_dlpack(b3)

    def ours():
        gpu_blas.matmul_spans(a3, b3.T, out, [(0, k)], a_type="float16", stream=stream)

    fns = {"ecornn_fp32_out": ours, "torch_fp16_out": lambda: torch.mm(a_t, b_t.T)}
    try:
        torch.mm(a_t, b_t.T, out_dtype=torch.float32)
        fns["torch_fp32_out"] = lambda: torch.mm(a_t, b_t.T, out_dtype=torch.float32)
    except Exception as exc:  # noqa: BLE001 - recorded: this torch has no out_dtype
        fns["torch_fp32_out_error"] = str(exc)[:120]
    times = {}
    for name, fn in fns.items():
        if not callable(fn):
            times[name] = fn
            continue
        for _ in range(3):
            fn()
        ts = []
        for _ in range(max(rounds, 10)):
            e = _events(cp, 2)
            e[0].record(stream); fn(); e[1].record(stream); e[1].synchronize()
            ts.append(1e3 * _ms(cp, e[0], e[1]))
        us = float(np.median(ts))
        times[name] = {"us": us, "tflops": flops / us / 1e6}
    return times


def markdown(rows, gemms, meta) -> str:
    device = meta.get("device", {})
    name = device.get("name", "?") if isinstance(device, dict) else device
    lines = [f"# v51 probe: the projection tail on the spare SMs ({name})", "",
             "| cell | tail | S0 | delay us | kernel alone | kernel with tail | tail alone | tail done | kernel at S0 | "
             "net us |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['dtype']} H={r['hidden']} B={r['batch']} | {r['tail_fraction']} | {r['s0']} | "
                     f"{r['delay_us']:.0f} | {r['kernel_alone_us']:.1f} | {r['kernel_with_tail_us']:.1f} | "
                     f"{r['tail_alone_us']:.1f} | {r['tail_done_us']:.1f} | {r['kernel_at_s0_us']:.1f} | "
                     f"{r['net_us']:+.1f} |")
    lines += ["", "net: kernel with tail - kernel alone - tail alone (negative: the overlap gains, if the tail is done "
              "before the kernel reaches S0)", "", "| cell | GEMM | us | TFLOP/s |", "|---|---|---|---|"]
    for g in gemms:
        for name, t in g["gemm"].items():
            if isinstance(t, dict):
                lines.append(f"| {g['dtype']} H={g['hidden']} B={g['batch']} | {name} | {t['us']:.1f} | "
                             f"{t['tflops']:.0f} |")
            else:
                lines.append(f"| {g['dtype']} H={g['hidden']} B={g['batch']} | {name} | {t} | |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = bench_meta()
    rows, gemms = [], []
    for cell in CELLS:
        r, g = probe_cell(*cell, args.rounds)
        rows += r
        gemms.append(g)
    (out / "probe_spare_sm_tail_v51.json").write_text(json.dumps({"meta": meta, "rows": rows, "gemms": gemms},
                                                                indent=1))
    table = markdown(rows, gemms, meta)
    (out / "probe_spare_sm_tail_v51.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
