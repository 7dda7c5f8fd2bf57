"""v55 probe: is staging a step's vector from L2 bound by each SM's intake or by L2's total output?

The persistent forwards stage per step, per block, the exchanged h (tagged words) and, with the in-kernel projection,
x_{t+1}: 16-64 KB from L2 with every lane's 16-byte loads in flight at once (kernels/persistent_mma.cu,
stage_tagged / stage_rows). v55's step clocks put 581 ns on fp16 H=1024 B=16's 32 KB and ~600 ns on 32 KB of x where
16 KB took ~300. This probe times the same access pattern alone: G blocks of 256 threads (one per SM), each reading
KB kilobytes per round (N = KB / 4 16-byte __ldcg loads per lane, all issued before any is used), either the same
buffer for all blocks (as the exchange: every block of a group reads the same h) or a buffer of its own. If a round's
time grows with G, L2's total output (or the crossbar) is the limit, and fewer bytes read per step by all blocks
together (packed tags, multicast) would shorten it; if it is flat in G and grows with KB, each SM's intake is.

    python benchmarks/probe_l2_ingress_v55.py OUT_DIR [--rounds N]
Writes OUT_DIR/probe_l2_ingress_v55.{json,md}.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_persistent import bench_args, bench_meta, save_rows  # noqa: E402

SOURCE = r"""
template <int N>
__device__ __forceinline__ void one_round(const uint4* src, unsigned int& acc, uint4* never) {
    uint4 v[N];
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = __ldcg(src + j * 256 + threadIdx.x);
    unsigned int round = 0;
#pragma unroll
    for (int j = 0; j < N; ++j) round ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
    if (round == 0x12345678u) {   // never: keeps every load live until all have arrived, as the staging's check does
#pragma unroll
        for (int j = 0; j < N; ++j) never[j * 256 + threadIdx.x] = v[j];
    }
    acc ^= round;
}

template <int N>
__device__ __forceinline__ void one_async_round(const uint4* src, uint4* dst) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
        const unsigned int d = (unsigned int)__cvta_generic_to_shared(dst + j * 256 + threadIdx.x);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src + j * 256 + threadIdx.x) : "memory");
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void one_staged_round(const uint4* src, uint4* dst) {   // loads, then shared stores
    uint4 v[N];
#pragma unroll
    for (int j = 0; j < N; ++j) v[j] = __ldcg(src + j * 256 + threadIdx.x);
#pragma unroll
    for (int j = 0; j < N; ++j) dst[j * 256 + threadIdx.x] = v[j];
}

template <int N>
__device__ void rounds(const uint4* buf, int distinct, int reps, unsigned long long* out, unsigned int* sink, int mode) {
    extern __shared__ uint4 staged[];
    const uint4* src = buf + (distinct ? (size_t)blockIdx.x * N * 256 : 0);
    unsigned int acc = 0;
    for (int r = 0; r < reps; ++r) {
        __syncthreads();
        const long long t0 = clock64();
        if (mode == 0) one_round<N>(src, acc, reinterpret_cast<uint4*>(sink) + 16);
        else if (mode == 1) one_async_round<N>(src, staged);
        else one_staged_round<N>(src, staged);
        __syncthreads();
        const long long t1 = clock64();
        if (threadIdx.x == 0) out[(size_t)blockIdx.x * reps + r] = (unsigned long long)(t1 - t0);
    }
    if (acc == 0x12345678u || staged[threadIdx.x].x == 0x12345678u) sink[0] = acc;   // keeps the loads
}

extern "C" __global__ void __launch_bounds__(256) probe(const uint4* buf, int n, int distinct, int reps,
                                                        unsigned long long* out, unsigned int* sink, int mode) {
    switch (n) {
        case 1: rounds<1>(buf, distinct, reps, out, sink, mode); break;
        case 2: rounds<2>(buf, distinct, reps, out, sink, mode); break;
        case 4: rounds<4>(buf, distinct, reps, out, sink, mode); break;
        case 8: rounds<8>(buf, distinct, reps, out, sink, mode); break;
        case 16: rounds<16>(buf, distinct, reps, out, sink, mode); break;
    }
}
"""

BLOCKS = (1, 16, 64, 128, 132)
LOADS_PER_LANE = (1, 2, 4, 8, 16)   # x 4 KB per block
MODES = {0: "loads", 1: "cp.async", 2: "loads, then shared stores"}   # call 2 measured loads only
MODE_BLOCKS = (1, 128)   # the other modes: one block, and one per SM of the persistent grids
REPS = 64
SKIP = 8


def measure(kernel, buf, sink, blocks, n, distinct, launches=5, mode=0):
    import cupy as cp
    out = cp.zeros((blocks * REPS,), cp.uint64)
    samples = []
    for _ in range(launches):
        kernel((blocks,), (256,), (buf, np.int32(n), np.int32(distinct), np.int32(REPS), out, sink, np.int32(mode)),
               shared_mem=16 * 256 * 16)
        cp.cuda.Device().synchronize()
        samples.append(cp.asnumpy(out).reshape(blocks, REPS)[:, SKIP:])
    return float(np.median(np.concatenate(samples)))


def _row(mode, distinct, n, blocks, cycles):
    kb = n * 4
    return {"mode": MODES[mode], "same_buffer": not distinct, "kb_per_block": kb, "blocks": blocks, "cycles": cycles,
            "bytes_per_clock_per_sm": kb * 1024 / cycles, "aggregate_bytes_per_clock": blocks * kb * 1024 / cycles}


def main(argv=None):
    args, out = bench_args(argv, repeats=5)
    import cupy as cp
    kernel = cp.RawModule(code=SOURCE, options=("-std=c++17",)).get_function("probe")
    kernel.max_dynamic_shared_size_bytes = 16 * 256 * 16
    rng = np.random.default_rng(55)
    words = 132 * 16 * 256 * 4
    buf = cp.asarray(rng.integers(1, 2**31, size=words, dtype=np.uint32))   # never zeros
    sink = cp.zeros((16 * 256 * 4 + 64,), cp.uint32)
    ghz = cp.cuda.runtime.getDeviceProperties(0)["clockRate"] / 1e6
    rows = []
    for mode in MODES:
        for distinct in ((0, 1) if mode == 0 else (0,)):
            for n in LOADS_PER_LANE:
                for blocks in (BLOCKS if mode == 0 else MODE_BLOCKS):
                    rows.append(_row(mode, distinct, n, blocks,
                                     measure(kernel, buf, sink, blocks, n, distinct, args.repeats, mode)))
                    print(rows[-1], flush=True)
    lines = []
    for mode in MODES:
        blocks = BLOCKS if mode == 0 else MODE_BLOCKS
        lines += [f"\n{MODES[mode]}:\n", "| buffer | KB per block | " + " | ".join(f"G={g}" for g in blocks) + " |",
                  "|" + "---|" * (len(blocks) + 2)]
        for distinct in ((False, True) if mode == 0 else (False,)):
            for n in LOADS_PER_LANE:
                cells = [r for r in rows if r["mode"] == MODES[mode] and r["same_buffer"] == (not distinct)
                         and r["kb_per_block"] == n * 4]
                lines.append(f"| {'own' if distinct else 'same'} | {n * 4} | " + " | ".join(
                    f"{r['cycles']:.0f} ({r['bytes_per_clock_per_sm']:.1f} B/clk)" for r in cells) + " |")
    md = ("SM cycles per round (median over blocks and rounds), and bytes per SM cycle per block; G blocks of 256 "
          f"threads. Max SM clock {ghz:.2f} GHz.\n" + "\n".join(lines) + "\n")
    save_rows(out, "probe_l2_ingress_v55", bench_meta(), rows, md)
    print(md)


if __name__ == "__main__":
    main()
