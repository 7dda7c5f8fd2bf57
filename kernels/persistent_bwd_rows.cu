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
// xch [D][2][blocks][THREADS * COLS_PER_THREAD][B] (slot = step parity); grid.sync(); then
// SPLIT consecutive lanes per (unit, batch) pair sum the blocks' partials (lane s takes blocks
// s, s + SPLIT, ...; then an xor butterfly: a fixed order, bitwise reproducible) and lane 0 of the
// pair runs the pointwise step of the next iteration.
//
// ecornn-persistent
// Check lines: H100 plans for H=1024 B=8 and B=4, H=512 B=8, H=1000 B=3 (odd units and batch),
// H=1024 B=16 (8 warps, 4 columns per thread).
// ecornn-check: -DBATCH=8 -DNWARPS=16 -DG_ROWS=32 -DCOLS_PER_THREAD=2
// ecornn-check: -DBATCH=4 -DNWARPS=16 -DG_ROWS=32 -DCOLS_PER_THREAD=2
// ecornn-check: -DBATCH=8 -DNWARPS=16 -DG_ROWS=16 -DCOLS_PER_THREAD=1
// ecornn-check: -DBATCH=3 -DNWARPS=16 -DG_ROWS=32 -DCOLS_PER_THREAD=2
// ecornn-check: -DBATCH=16 -DNWARPS=8 -DG_ROWS=32 -DCOLS_PER_THREAD=4
#include <cooperative_groups.h>

#include "persistent_common.cuh"

namespace cg = cooperative_groups;

constexpr int kBatch = BATCH;
constexpr int kThreads = 32 * NWARPS;
constexpr int kRows = G_ROWS;                  // the block's 4U gate rows
constexpr int kUnits = G_ROWS / 4;
constexpr int kCols = COLS_PER_THREAD;
constexpr int kPaddedH = kThreads * kCols;     // partial columns per block
constexpr int kPairs = kUnits * kBatch;
constexpr int kSplitWanted = kThreads / kPairs;
constexpr int kSplit = kSplitWanted >= 32 ? 32 : kSplitWanted >= 16 ? 16 : kSplitWanted >= 8 ? 8
                     : kSplitWanted >= 4 ? 4 : kSplitWanted >= 2 ? 2 : 1;
static_assert(G_ROWS % 4 == 0, "whole units of 4 gate rows");
static_assert(kPairs <= kThreads, "one (unit, batch) pair per SPLIT threads");

__device__ __forceinline__ void load_columns(float (&w)[kCols][kRows], const float* tiles, size_t tile) {
    const float* src = tiles + tile * ((size_t)kCols * kRows * kThreads);
#pragma unroll
    for (int c = 0; c < kCols; ++c)
#pragma unroll
        for (int g = 0; g < kRows; ++g) w[c][g] = src[((size_t)c * kRows + g) * kThreads + threadIdx.x];
}

// acc[c][b] = sum over the block's rows g of W[g][k_c] dz_s[g][b], published to `part` [k][b].
__device__ __forceinline__ void publish_partials(const float (&w)[kCols][kRows], const float* dz_s, float* part) {
    float acc[kCols][kBatch];
#pragma unroll
    for (int c = 0; c < kCols; ++c)
#pragma unroll
        for (int b = 0; b < kBatch; ++b) acc[c][b] = 0.0f;
#pragma unroll
    for (int g = 0; g < kRows; ++g) {
        float v[kBatch];
        load_column(v, dz_s + g * kBatch);
#pragma unroll
        for (int c = 0; c < kCols; ++c)
#pragma unroll
            for (int b = 0; b < kBatch; ++b) acc[c][b] = fmaf(w[c][g], v[b], acc[c][b]);
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
        float* p = part + ((size_t)threadIdx.x + (size_t)c * kThreads) * kBatch;
#pragma unroll
        for (int b = 0; b < kBatch; ++b) p[b] = acc[c][b];
    }
}

// dh of unit j, batch b: the blocks' partials [blocks][kPaddedH][B] summed by the SPLIT lanes of
// the pair (lane s: blocks s, s + SPLIT, ... in order), then an xor butterfly over those lanes.
// Every thread of the warp calls it (the shuffles need them all); `active` gates the loads.
__device__ __forceinline__ float reduce_partials(const float* part, int blocks, int j, int b, bool active) {
    const int s = threadIdx.x % kSplit;
    float sum = 0.0f;
    if (active) {
#pragma unroll 4
        for (int blk = s; blk < blocks; blk += kSplit)
            sum += __ldcg(part + ((size_t)blk * kPaddedH + j) * kBatch + b);
    }
#pragma unroll
    for (int off = 1; off < kSplit; off *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    return sum;
}

// tiles [D][blocks][COLS_PER_THREAD][G_ROWS][THREADS] (pack_column_tiles of the gate-interleaved
// W_hh); the other arguments as persistent_lstm.cu PASS=1: dy [T][B][ldy] (direction d at columns
// d*H); gates [D][T][B][4H] activated, cells [D][T][B][H]; c0, dhT, dcT, dh0, dc0 [D][B][H]; dz
// [D][T][B][4H] gate-interleaved output; xch [D][2][blocks][THREADS * COLS_PER_THREAD][B] partials.
extern "C" __global__ void __launch_bounds__(kThreads, 1)
persistent_lstm_bwd(const float* __restrict__ tiles, const float* __restrict__ dy,
                    const float* __restrict__ gates, const float* __restrict__ cells,
                    const float* __restrict__ c0, const float* __restrict__ dhT,
                    const float* __restrict__ dcT, float* dz, float* dh0, float* dc0, int T, int H,
                    int units, int blocks_per_dir, int ldy, int dir0, float* xch) {
    __shared__ __align__(16) float dz_s[kRows * kBatch];
    const int blk = blockIdx.x % blocks_per_dir;
    const int d = dir0 + blockIdx.x / blocks_per_dir;
    const bool reverse = d == 1;
    float w[kCols][kRows];
    load_columns(w, tiles, (size_t)d * blocks_per_dir + blk);
    const int pair = threadIdx.x / kSplit, u = pair / kBatch, b = pair % kBatch, j = blk * units + u;
    const bool active = pair < kPairs && u < units && j < H;
    const bool lead = active && threadIdx.x % kSplit == 0;   // runs the pair's pointwise step
    const size_t state_at = ((size_t)d * kBatch + b) * H + j;
    const size_t slot_floats = (size_t)blocks_per_dir * kPaddedH * kBatch;
    float dc_next = 0.0f, dh_rec = 0.0f;   // dh_rec: W_hh^T . dz of the step after (dhT first)
    BwdInputs in{};
    if (lead) {
        dc_next = dcT[state_at];
        dh_rec = dhT[state_at];
        in = load_bwd_inputs<kBatch>(gates, cells, c0, dy, d, T, H, ldy, T - 1, reverse, b, j);
    }
    for (int idx = threadIdx.x; idx < kRows * kBatch; idx += kThreads) dz_s[idx] = 0.0f;   // padding units
    __syncthreads();
    cg::grid_group grid = cg::this_grid();
    const size_t G = 4 * (size_t)H;
    for (int step = T - 1; step >= 0; --step) {
        const int t = reverse ? T - 1 - step : step;
        const int n = T - 1 - step;
        float* part = xch + ((size_t)d * 2 + (n & 1)) * slot_floats;
        if (lead) {
            const float gi = in.g.x, gf = in.g.y, gg = in.g.z, go = in.g.w;
            const float tc = tanhf(in.c);
            const float dh = in.dy + dh_rec;
            const float dc = dh * go * (1.0f - tc * tc) + dc_next;
            const float4 out = make_float4(dc * gg * gi * (1.0f - gi), dc * in.c_prev * gf * (1.0f - gf),
                                           dc * gi * (1.0f - gg * gg), dh * tc * go * (1.0f - go));
            *reinterpret_cast<float4*>(dz + (((size_t)d * T + t) * kBatch + b) * G + 4 * (size_t)j) = out;
            dz_s[(4 * u) * kBatch + b] = out.x;
            dz_s[(4 * u + 1) * kBatch + b] = out.y;
            dz_s[(4 * u + 2) * kBatch + b] = out.z;
            dz_s[(4 * u + 3) * kBatch + b] = out.w;
            dc_next = dc * gf;
            if (step > 0) in = load_bwd_inputs<kBatch>(gates, cells, c0, dy, d, T, H, ldy, step - 1, reverse, b, j);
        }
        __syncthreads();
        publish_partials(w, dz_s, part + (size_t)blk * kPaddedH * kBatch);
        grid.sync();   // every block's partials are written; also orders dz_s reads before the next writes
        const float dh = reduce_partials(part, blocks_per_dir, j, b, active);
        if (lead) dh_rec = dh;
    }
    if (lead) {
        dh0[state_at] = dh_rec;
        dc0[state_at] = dc_next;
    }
}
