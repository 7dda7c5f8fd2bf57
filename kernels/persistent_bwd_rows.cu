// Persistent LSTM backward recurrence split by gate rows (v7, fp32): the block that owns hidden
// units U keeps W_hh[its 4U gate rows, all H columns] on chip (the forward's rows) and multiplies
// them, transposed, by ITS OWN dz_t (computed by its own pointwise threads): partial dh_{t-1} for
// all H units. The owners sum the blocks' partials. Per step and block that is H x B partials
// written and U x B x blocks read, instead of the whole 4H x B dz_t read by every block
// (persistent_lstm.cu PASS=1: 128 KB per block per step at H=1024 B=8).
//
// Thread t holds columns k = t + c * THREADS (c < COLS_PER_THREAD) of all G_ROWS rows in registers
// (layouts/persistent.py: pack_column_tiles). Per step: the owners' pointwise threads write dz_t to
// global (for the weight gradients) and to shared memory; __syncthreads; every thread forms
// acc[c][b] = sum_g W[g][k] dz[g][b] (dz read as shared-memory broadcasts) and publishes it to
// xch [D][2][blocks][THREADS * COLS_PER_THREAD][B, from B=6 rounded up to 4] (slot = step parity); grid.sync();
// then the owners sum the blocks' partials: thread t takes pair t % PAIRS ((unit, batch), consecutive in
// the partials, so a warp's loads are contiguous) of blocks s, s + SPLIT, ... (s = t / PAIRS), all
// its loads in flight at once; the SPLIT sums meet in shared memory and thread `pair` adds them in
// order (bitwise reproducible) and runs the pair's pointwise step of the next iteration.
//
// ecornn-persistent
// Check lines: H100 plans for H=1024 B=8 and B=4, H=512 B=8, H=1000 B=3 (odd units and batch),
// H=1024 B=16 (8 warps, 4 columns per thread).
// ecornn-check: -DBATCH=8 -DNWARPS=16 -DG_ROWS=32 -DCOLS_PER_THREAD=2 -DBLOCKS=128
// ecornn-check: -DBATCH=4 -DNWARPS=16 -DG_ROWS=32 -DCOLS_PER_THREAD=2 -DBLOCKS=128
// ecornn-check: -DBATCH=8 -DNWARPS=16 -DG_ROWS=16 -DCOLS_PER_THREAD=1 -DBLOCKS=128
// ecornn-check: -DBATCH=3 -DNWARPS=16 -DG_ROWS=32 -DCOLS_PER_THREAD=2 -DBLOCKS=125
// ecornn-check: -DBATCH=16 -DNWARPS=8 -DG_ROWS=32 -DCOLS_PER_THREAD=4 -DBLOCKS=128
// v45, the padded batch stride: H=1024 B=7 and B=10.
// ecornn-check: -DBATCH=7 -DNWARPS=16 -DG_ROWS=32 -DCOLS_PER_THREAD=2 -DBLOCKS=128
// ecornn-check: -DBATCH=10 -DNWARPS=8 -DG_ROWS=32 -DCOLS_PER_THREAD=4 -DBLOCKS=128
// v32, the late loads: H=1024 B=8 and B=16.
// ecornn-check: -DBATCH=8 -DNWARPS=16 -DG_ROWS=32 -DCOLS_PER_THREAD=2 -DBLOCKS=128 -DBWD_LATE_LOADS=1
// ecornn-check: -DBATCH=16 -DNWARPS=8 -DG_ROWS=32 -DCOLS_PER_THREAD=4 -DBLOCKS=128 -DBWD_LATE_LOADS=1
#include <cooperative_groups.h>

#include "persistent_common.cuh"

namespace cg = cooperative_groups;

constexpr int kBatch = BATCH;
constexpr int kThreads = 32 * NWARPS;
constexpr int kRows = G_ROWS;                  // the block's 4U gate rows
constexpr int kUnits = G_ROWS / 4;
constexpr int kCols = COLS_PER_THREAD;
constexpr int kPaddedH = kThreads * kCols;     // partial columns per block
constexpr int kBlocks = BLOCKS;               // blocks per direction
constexpr int kPairs = kUnits * kBatch;
// v45: the batch stride of the partials and of dz_s, from B=6 a multiple of 4 so that both move as float4s. With the
// stride B itself, B % 4 != 0 published the partials by scalar stores and read dz_s by scalar loads: H=1024 fwd+bwd
// ms B=7 3.87 -> 3.03, B=9 5.72 -> 3.67, B=10 5.52 -> 3.73, B=11 7.03 -> 3.98, B=14 8.58 -> 4.84, B=6 2.99 -> 2.81
// (results/persistent_v45, calls 2-4). B=5 measured slower padded (2.48 -> 2.62); B=3 padded spills 12 bytes at 16
// warps' 128 registers: B <= 5 keep their stride.
constexpr int kBatchPad = kBatch > 5 ? (kBatch + 3) & ~3 : kBatch;
constexpr int kSplit = kThreads / kPairs < kBlocks ? kThreads / kPairs : kBlocks;
constexpr int kLoads = (kBlocks + kSplit - 1) / kSplit;   // partials each reducing thread loads
static_assert(G_ROWS % 4 == 0, "whole units of 4 gate rows");
static_assert(kPairs <= kThreads, "one thread per (unit, batch) pair at least");

__device__ __forceinline__ void load_columns(float (&w)[kCols][kRows], const float* tiles, size_t tile) {
    const float* src = tiles + tile * ((size_t)kCols * kRows * kThreads);
#pragma unroll
    for (int c = 0; c < kCols; ++c)
#pragma unroll
        for (int g = 0; g < kRows; ++g) w[c][g] = src[((size_t)c * kRows + g) * kThreads + threadIdx.x];
}

// A partial's value for column b, 0 for the padding columns b >= kBatch (resolved at compile time: unrolled).
__device__ __forceinline__ float acc_or_zero(const float (&acc)[kBatch], int b) { return b < kBatch ? acc[b] : 0.0f; }

// acc[c][b] = sum over the block's rows g of W[g][k_c] dz_s[g][b], published to `part` [k][b] (b < kBatchPad: the
// padding columns are zeros).
__device__ __forceinline__ void publish_partials(const float (&w)[kCols][kRows], const float* dz_s, float* part) {
    float acc[kCols][kBatch];
#pragma unroll
    for (int c = 0; c < kCols; ++c)
#pragma unroll
        for (int b = 0; b < kBatch; ++b) acc[c][b] = 0.0f;
#pragma unroll
    for (int g = 0; g < kRows; ++g) {
        float v[kBatchPad];
        load_column(v, dz_s + g * kBatchPad);
#pragma unroll
        for (int c = 0; c < kCols; ++c)
#pragma unroll
            for (int b = 0; b < kBatch; ++b) acc[c][b] = fmaf(w[c][g], v[b], acc[c][b]);
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
        float* p = part + ((size_t)threadIdx.x + (size_t)c * kThreads) * kBatchPad;
        if constexpr (kBatchPad % 4 == 0) {
#pragma unroll
            for (int b = 0; b < kBatchPad; b += 4)
                *reinterpret_cast<float4*>(p + b) = make_float4(acc_or_zero(acc[c], b), acc_or_zero(acc[c], b + 1),
                                                                acc_or_zero(acc[c], b + 2), acc_or_zero(acc[c], b + 3));
        } else {   // B <= 5
#pragma unroll
            for (int b = 0; b < kBatch; ++b) p[b] = acc[c][b];
        }
    }
}

// The owners' sums of the blocks' partials `part` [blocks][kPaddedH][kBatchPad] for this block's pairs
// (its first unit's partials at `first`): thread t sums pair t % kPairs over blocks s, s + kSplit, ... (s = t /
// kPairs) in order, the kSplit sums meet in red_s; thread `pair` returns their sum in s order.
__device__ __forceinline__ float reduce_partials(const float* part, size_t first, float* red_s) {
    const int pair = threadIdx.x % kPairs, s = threadIdx.x / kPairs;
    const int at = kBatchPad == kBatch ? pair : (pair / kBatch) * kBatchPad + pair % kBatch;   // (unit, b) in part
    if (s < kSplit) {
        float v[kLoads];
#pragma unroll
        for (int i = 0; i < kLoads; ++i) {
            const int blk = s + i * kSplit;
            v[i] = blk < kBlocks ? __ldcg(part + (size_t)blk * kPaddedH * kBatchPad + first + at) : 0.0f;
        }
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < kLoads; ++i) sum += v[i];
        red_s[s * kPairs + pair] = sum;
    }
    __syncthreads();
    float dh = 0.0f;
    if (threadIdx.x < kPairs)
#pragma unroll 4
        for (int k = 0; k < kSplit; ++k) dh += red_s[k * kPairs + threadIdx.x];
    return dh;
}

// tiles [D][blocks][COLS_PER_THREAD][G_ROWS][THREADS] (pack_column_tiles of the gate-interleaved
// W_hh); the other arguments as persistent_lstm.cu PASS=1: dy [T][B][ldy] (direction d at columns
// d*H); gates [D][T][B][4H] activated, cells [D][T][B][H]; c0, dhT, dcT, dh0, dc0 [D][B][H]; dz
// [D][T][B][4H] gate-interleaved output; xch [D][2][blocks][THREADS * COLS_PER_THREAD][kBatchPad] partials.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
persistent_lstm_bwd(const float* __restrict__ tiles, const float* __restrict__ dy,
                    const float* __restrict__ gates, const float* __restrict__ cells,
                    const float* __restrict__ c0, const float* __restrict__ dhT,
                    const float* __restrict__ dcT, float* dz, float* dh0, float* dc0, int T, int H,
                    int units, int blocks_per_dir, int ldy, int dir0, float* xch) {
    __shared__ __align__(16) float dz_s[kRows * kBatchPad];
    __shared__ float red_s[kSplit * kPairs];
    const int blk = blockIdx.x % blocks_per_dir;
    const int d = dir0 + blockIdx.x / blocks_per_dir;
    const bool reverse = d == 1;
    float w[kCols][kRows];
    load_columns(w, tiles, (size_t)d * blocks_per_dir + blk);
    const int u = threadIdx.x / kBatch, b = threadIdx.x % kBatch, j = blk * units + u;
    const bool lead = (int)threadIdx.x < kPairs && u < units && j < H;   // runs pair (u, b)'s pointwise step
    const size_t state_at = ((size_t)d * kBatch + b) * H + j;
    const size_t slot_floats = (size_t)blocks_per_dir * kPaddedH * kBatchPad;
    float dc_next = 0.0f, dh_rec = 0.0f;   // dh_rec: W_hh^T . dz of the step after (dhT first)
    BwdInputs in{};
    if (lead) {
        dc_next = dcT[state_at];
        dh_rec = dhT[state_at];
        in = load_bwd_inputs<kBatch>(gates, cells, c0, dy, d, T, H, ldy, T - 1, reverse, b, j);
    }
    for (int idx = threadIdx.x; idx < kRows * kBatchPad; idx += kThreads) dz_s[idx] = 0.0f;   // padding units, columns
    __syncthreads();
    cg::grid_group grid = cg::this_grid();
    const size_t G = 4 * (size_t)H;
    for (int step = T - 1; step >= 0; --step) {
        const int t = reverse ? T - 1 - step : step;
        const int n = T - 1 - step;
        float* part = xch + ((size_t)d * 2 + (n & 1)) * slot_floats;
        if (lead) {
            const float tc = tanhf_(in.c);
            float dc;
            const float4 out = pointwise_backward(in, in.dy + dh_rec, tc, dc_next, dc);
            *reinterpret_cast<float4*>(dz + (((size_t)d * T + t) * kBatch + b) * G + 4 * (size_t)j) = out;
            dz_s[(4 * u) * kBatchPad + b] = out.x;
            dz_s[(4 * u + 1) * kBatchPad + b] = out.y;
            dz_s[(4 * u + 2) * kBatchPad + b] = out.z;
            dz_s[(4 * u + 3) * kBatchPad + b] = out.w;
            dc_next = dc * in.g.y;
            if (!BWD_LATE_LOADS && step > 0)
                in = load_bwd_inputs<kBatch>(gates, cells, c0, dy, d, T, H, ldy, step - 1, reverse, b, j);
        }
        __syncthreads();
        publish_partials(w, dz_s, part + (size_t)blk * kPaddedH * kBatchPad);
        grid.sync();   // every block's partials are written; also orders dz_s reads before the next writes
        if (BWD_LATE_LOADS && lead && step > 0)   // v32: not in flight at the barrier's fence
            in = load_bwd_inputs<kBatch>(gates, cells, c0, dy, d, T, H, ldy, step - 1, reverse, b, j);
        const float dh = reduce_partials(part, (size_t)blk * units * kBatchPad, red_s);
        if (lead) dh_rec = dh;
    }
    if (lead) {
        dh0[state_at] = dh_rec;
        dc0[state_at] = dc_next;
    }
}
