// One LSTM step of the `fused` strategy as ONE kernel for fp16/bf16: the recurrent product on tensor
// cores (mma.sync m16n8k16, fp32 accumulate) with the pointwise LSTM math in the epilogue.
// Replaces the two graph nodes per step (cuBLAS GEMM + fused_pointwise.cu) where latency dominates.
//
// The product is  D[b][n] = sum_k act[b][k] * Op[k][n]  with
//   forward:  act = h_{t-1} [B][H] (16-bit, row stride h_ld),  Op = W_hh^T  (n = gate-interleaved row 4j+q)
//   backward: act = dz_{t+1} [B][4H] (16-bit),                Op = W_hh    (n = hidden unit j, k = row 4j'+q)
// mma operand A = act (rows = batch, loaded straight from global into fragments: each element is
// read once per block, so staging it in shared memory would only add a barrier), operand B = Op,
// pre-packed once on the host into fragment order (ecornn/engines/fused_mma.py, pack_fragments):
//   packed[col_block][k_step][lane][2*N_TILES] u32,  entry 2*nt+half = Op[16ks + 4c + 2half, +1][8nt + g]
// so each warp's B loads are contiguous 8*N_TILES bytes per lane (ld.global.nc, L2-resident).
// K order inside a k-step: the lane that holds logical k (2c, 2c+1) and (2c+8, 2c+9) of the
// mma_common.cuh maps gets physical k 4c..4c+1 and 4c+2..4c+3, in A and B alike (a sum does not
// depend on the order): a0/a2 (and a1/a3) are then one 8-byte load, whole sectors per warp.
//
// Block = (column block, batch tile): grid (ceil(H/units), ceil(B/rows)). Warps form an
// M_WARPS x (NWARPS / M_WARPS) grid: M_WARPS groups split the block's batch rows (each warp
// M_TILES / M_WARPS m-tiles), the others split K into contiguous ranges of k-steps (K-slices). Each
// warp loads all fragments of a group of k-steps before its mmas (one L2 round trip per group; the
// latency-bound tiles of the size rule make a warp's whole K-slice one group, e.g. fp16 H=256
// B=128: 64 rows x 4 units, 2 row groups x 4 K-slices of 4 k-steps). Partial sums go to shared
// memory [K-slice][row][col] and are added in K-slice order (fixed order: bitwise reproducible run
// to run, and the same sums whatever M_WARPS is); then one thread per (batch row, unit) applies
// exactly the math of lstm_forward_step / lstm_backward_step (same stores, same saved values).
// Every input of that epilogue (z_t, c_{t-1}, the bias; the backward's saved gates, cells, dy, dc)
// is loaded at kernel start when a thread owns <= 2 (row, unit) pairs (all tiles the chooser picks
// for the size rule), so its latency overlaps the product instead of following the barrier.
//
// Kernel boundaries are the only grid-wide barrier: a launch reads h_{t-1} / dz_{t+1} written by
// the previous launch and writes only rows/columns of its own (batch tile, units).
//
// Compile-time: BF16 (0 fp16, 1 bf16), M_TILES (batch rows / 16), N_TILES (columns / 8: forward
// 2 units per tile, backward 8 units per tile), NWARPS, M_WARPS (warp groups splitting the rows;
// divides NWARPS and M_TILES).
//
// The configurations the size rule picks for the benchmark grid (fused_mma.choose_tile):
// ecornn-check: -DBF16=0 -DM_TILES=4 -DN_TILES=2 -DNWARPS=8 -DM_WARPS=2
// ecornn-check: -DBF16=1 -DM_TILES=4 -DN_TILES=2 -DNWARPS=16 -DM_WARPS=2
// ecornn-check: -DBF16=1 -DM_TILES=4 -DN_TILES=4 -DNWARPS=16 -DM_WARPS=2
// ecornn-check: -DBF16=0 -DM_TILES=2 -DN_TILES=2 -DNWARPS=4 -DM_WARPS=1
// ecornn-check: -DBF16=0 -DM_TILES=1 -DN_TILES=2 -DNWARPS=4 -DM_WARPS=1
// ecornn-check: -DBF16=0 -DM_TILES=1 -DN_TILES=4 -DNWARPS=16 -DM_WARPS=1
// ecornn-check: -DBF16=1 -DM_TILES=1 -DN_TILES=2 -DNWARPS=8 -DM_WARPS=1
// ecornn-check: -DBF16=0 -DM_TILES=1 -DN_TILES=1 -DNWARPS=16 -DM_WARPS=1
// ecornn-check: -DBF16=0 -DM_TILES=2 -DN_TILES=1 -DNWARPS=16 -DM_WARPS=1
// ecornn-check: -DBF16=1 -DM_TILES=4 -DN_TILES=1 -DNWARPS=16 -DM_WARPS=1

#include "mma_common.cuh"

#ifndef BF16
#define BF16 0
#endif
#ifndef M_TILES
#define M_TILES 2
#endif
#ifndef N_TILES
#define N_TILES 4
#endif
#ifndef NWARPS
#define NWARPS 4
#endif
#ifndef M_WARPS
#define M_WARPS 1
#endif

// Everything below lives in a namespace: mma_common.cuh is shared with the persistent kernels and
// grows; a helper added there under the same name must not collide (extern "C" kernels keep their
// plain symbol names inside a namespace).
namespace fused_step {

constexpr bool kBf16 = BF16 != 0;
constexpr int kMTiles = M_TILES;
constexpr int kNTiles = N_TILES;
constexpr int kWarps = NWARPS;
constexpr int kMWarps = M_WARPS;              // warp groups splitting the batch rows
constexpr int kKWarps = kWarps / kMWarps;     // warps splitting K (K-slices) per row group
constexpr int kWarpMTiles = kMTiles / kMWarps;  // m-tiles of one warp
static_assert(kWarps % kMWarps == 0 && kMTiles % kMWarps == 0, "M_WARPS must divide NWARPS and M_TILES");
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kMTiles;      // batch rows per block
constexpr int kCols = 8 * kNTiles;       // product columns per block
constexpr int kPitch = kCols + 8;        // shared partial row pitch in floats (float2 stores conflict-free)
constexpr int kFwdUnits = kCols / 4;     // forward: four gate columns per unit
constexpr int kBwdUnits = kCols;         // backward: one column per unit
constexpr int kFwdPerThread = (kRows * kFwdUnits + kThreads - 1) / kThreads;
constexpr int kBwdPerThread = (kRows * kBwdUnits + kThreads - 1) / kThreads;

typedef unsigned short half_bits;  // raw fp16/bf16 storage (NVRTC needs no cuda_fp16.h)

// ---- loads ----------------------------------------------------------------------------------

// Not volatile: the weights are read-only for the whole kernel, and the loads must be free to move
// ahead of the (volatile) mma instructions of earlier k-steps.
__device__ __forceinline__ uint4 ldg_nc_v4(const unsigned int* p) {
    uint4 v;
    asm("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
}

__device__ __forceinline__ uint2 ldg_nc_v2(const unsigned int* p) {
    uint2 v;
    asm("ld.global.nc.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
    return v;
}

// This warp's B fragments of one k-step: 2*N_TILES registers, one or two vector loads per pair of tiles.
__device__ __forceinline__ void load_b(unsigned int (&b)[2 * kNTiles], const unsigned int* p) {
    if constexpr (kNTiles % 2 == 0) {
#pragma unroll
        for (int i = 0; i < kNTiles / 2; ++i) {
            uint4 v = ldg_nc_v4(p + 4 * i);
            b[4 * i] = v.x; b[4 * i + 1] = v.y; b[4 * i + 2] = v.z; b[4 * i + 3] = v.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < kNTiles; ++i) {
            uint2 v = ldg_nc_v2(p + 2 * i);
            b[2 * i] = v.x; b[2 * i + 1] = v.y;
        }
    }
}

// The four 16-bit activations k..k+3 of row r as two registers (k, k+1) and (k+2, k+3), zero
// outside rows x K. kAligned: K % 16 == 0 and 8-byte aligned rows: one in-bounds 64-bit load.
template <bool kAligned>
__device__ __forceinline__ uint2 act_quad(const half_bits* act, int ld, int r, int rows, int k, int K) {
    if (r >= rows) return make_uint2(0u, 0u);
    const half_bits* p = act + static_cast<size_t>(r) * ld + k;
    if constexpr (kAligned) {
        return *reinterpret_cast<const uint2*>(p);
    } else {
        unsigned int v[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = k + i < K ? p[i] : 0u;
        return make_uint2(v[0] | (v[1] << 16), v[2] | (v[3] << 16));
    }
}

// A fragment of the 16 x 16 activation tile at (row0, k0): rows per the map in mma_common.cuh,
// physical k 4c..4c+3 (see the K order above).
template <bool kAligned>
__device__ __forceinline__ void load_a(unsigned int (&a)[4], const half_bits* act, int ld, int row0,
                                       int rows, int k0, int K) {
    const int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    const uint2 upper = act_quad<kAligned>(act, ld, row0 + g, rows, k0 + 4 * c, K);
    const uint2 lower = act_quad<kAligned>(act, ld, row0 + g + 8, rows, k0 + 4 * c, K);
    a[0] = upper.x; a[2] = upper.y;
    a[1] = lower.x; a[3] = lower.y;
}

// ---- the product ----------------------------------------------------------------------------

typedef float Acc[kWarpMTiles][kNTiles][4];

// k-steps whose fragments are loaded together before their mmas: the step is latency-bound, so
// several L2 round trips must be in flight per warp; tiles with few fragment registers per k-step
// (4 per A tile, 2 per B tile) can afford more (4 x 18 spills at the 128-register cap of 512 threads).
constexpr int kFragRegs = 4 * kWarpMTiles + 2 * kNTiles;
constexpr int kGroup = kFragRegs <= 12 ? 4 : 2;

// acc += act[row0 : row0 + 16*kWarpMTiles, 16*ks0 : 16*ks1] . Op for this warp's k-steps; packed =
// this block's fragments. All loads of a group are issued before its mmas. (Clamping the k-step
// instead of breaking, to drop the uniform branches between loads, made ptxas spill in two tiles.)
template <bool kAligned>
__device__ __forceinline__ void warp_product(Acc& acc, const half_bits* act, int ld, int row0, int rows,
                                             int K, const unsigned int* packed, int ks0, int ks1) {
    const int lane = threadIdx.x & 31;
    for (int ks = ks0; ks < ks1; ks += kGroup) {
        unsigned int b[kGroup][2 * kNTiles];
        unsigned int a[kGroup][kWarpMTiles][4];
#pragma unroll
        for (int s = 0; s < kGroup; ++s) {
            if (ks + s >= ks1) break;
            const int kk = ks + s;
            load_b(b[s], packed + (static_cast<size_t>(kk) * 32 + lane) * (2 * kNTiles));
#pragma unroll
            for (int mt = 0; mt < kWarpMTiles; ++mt) {
                load_a<kAligned>(a[s][mt], act, ld, row0 + 16 * mt, rows, 16 * kk, K);
            }
        }
#pragma unroll
        for (int s = 0; s < kGroup; ++s) {
            if (ks + s >= ks1) break;
#pragma unroll
            for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
                for (int nt = 0; nt < kNTiles; ++nt) {
                    mma_16816<kBf16>(acc[mt][nt], a[s][mt], b[s][2 * nt], b[s][2 * nt + 1]);
                }
        }
    }
}

// Each warp's partial tile (its rows, its K-slice) into shared memory part[kslice][row][col]
// (pitch kPitch), then a barrier.
__device__ __forceinline__ void block_product(float* part, const half_bits* act, int ld, int rows, int K,
                                              const unsigned int* packed, int aligned) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
    // (M_WARPS = 1 spelled out: the compiler does not know warp < kWarps, so warp / kKWarps would
    // not fold to 0 and cost registers in the v3 tiles)
    const int kw = kMWarps == 1 ? warp : warp % kKWarps;
    const int row0 = kMWarps == 1 ? 0 : 16 * kWarpMTiles * (warp / kKWarps);
    const int steps = (K + 15) / 16;
    const int per_warp = (steps + kKWarps - 1) / kKWarps;
    const int ks0 = min(steps, kw * per_warp), ks1 = min(steps, ks0 + per_warp);
    Acc acc;
#pragma unroll
    for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
    if (aligned) {
        warp_product<true>(acc, act, ld, row0, rows, K, packed, ks0, ks1);
    } else {
        warp_product<false>(acc, act, ld, row0, rows, K, packed, ks0, ks1);
    }
    float* mine = part + (kw * kRows + row0) * kPitch;
#pragma unroll
    for (int mt = 0; mt < kWarpMTiles; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt) {
            float* p = mine + (16 * mt + g) * kPitch + 8 * nt + 2 * c;
            *reinterpret_cast<float2*>(p) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
            *reinterpret_cast<float2*>(p + 8 * kPitch) = make_float2(acc[mt][nt][2], acc[mt][nt][3]);
        }
    __syncthreads();
}

// Sum over K-slices of column(s) `col` of row `row`, always in order 0, 1, ... (reproducible).
__device__ __forceinline__ float4 sum_partials4(const float* part, int row, int col) {
    float4 s = *reinterpret_cast<const float4*>(part + row * kPitch + col);
#pragma unroll
    for (int w = 1; w < kKWarps; ++w) {
        const float4 v = *reinterpret_cast<const float4*>(part + (w * kRows + row) * kPitch + col);
        s.x += v.x; s.y += v.y; s.z += v.z; s.w += v.w;
    }
    return s;
}

__device__ __forceinline__ float sum_partials1(const float* part, int row, int col) {
    float s = part[row * kPitch + col];
#pragma unroll
    for (int w = 1; w < kKWarps; ++w) s += part[(w * kRows + row) * kPitch + col];
    return s;
}

// ---- pointwise helpers (same math and rounding as fused_pointwise.cu) -------------------------

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + __expf(-x)); }

__device__ __forceinline__ void store_half(half_bits* p, float v) {
    *p = static_cast<half_bits>(pack_pair<kBf16>(v, 0.0f) & 0xffffu);
}

// ---- forward --------------------------------------------------------------------------------

// What the forward epilogue reads besides the product: input projection, bias, c_{t-1}.
struct FwdIn {
    float4 pre;
    float4 bias;
    float c_prev;
};

// Pair p of this block (batch row p / units, unit p % units: units adjacent across threads, so
// the float4 reads of z are coalesced) in global coordinates; live = inside the problem.
struct Pair {
    int r, u, b, j;
    bool live;
};

template <int kUnits>
__device__ __forceinline__ Pair pair_of(int i, int b0, int u0, int batch, int hidden) {
    Pair q;
    const int p = threadIdx.x + i * kThreads;
    q.r = p / kUnits; q.u = p % kUnits; q.b = b0 + q.r; q.j = u0 + q.u;
    q.live = p < kRows * kUnits && q.b < batch && q.j < hidden;
    return q;
}

__device__ __forceinline__ FwdIn load_fwd_in(const Pair& q, const float* z, const float* __restrict__ bias,
                                             const float* c_prev, int hidden) {
    FwdIn in;
    in.pre = *reinterpret_cast<const float4*>(z + static_cast<size_t>(q.b) * 4 * hidden + 4 * q.j);
    in.bias = *reinterpret_cast<const float4*>(bias + 4 * q.j);
    in.c_prev = c_prev[static_cast<size_t>(q.b) * hidden + q.j];
    return in;
}

// Prefetching the epilogue's inputs overlaps their latency with the product, but costs registers:
// only when each thread owns at most two (row, unit) pairs. (Loaded after the barrier, each of them
// is one more dependent L2 round trip on the step's critical path: v3 read the bias there.)
constexpr bool kFwdPrefetch = kFwdPerThread <= 2;
constexpr bool kBwdPrefetch = kBwdPerThread <= 2;

// One forward step: h_t, c_t of units [blockIdx.x * kFwdUnits, +kFwdUnits) x batch tile blockIdx.y.
// z holds x W_ih^T (no bias, fp32); training (save_gates) overwrites it with the activated gates.
// Arguments after `aligned` mirror lstm_forward_step.
extern "C" __global__ void __launch_bounds__(kThreads)
fused_step_fwd(const unsigned int* __restrict__ packed, const half_bits* h_prev, int h_ld, int aligned,
               float* z, const float* __restrict__ bias, const float* c_prev, float* c_out,
               half_bits* h_out, int y_ld, half_bits* h_final, half_bits* c_final, int save_gates,
               int batch, int hidden) {
    extern __shared__ float4 shared_words[];
    float* part = reinterpret_cast<float*>(shared_words);
    const int b0 = blockIdx.y * kRows, u0 = blockIdx.x * kFwdUnits;
    const int k_steps = (hidden + 15) / 16;
    FwdIn early[kFwdPrefetch ? kFwdPerThread : 1];
    if constexpr (kFwdPrefetch) {
#pragma unroll
        for (int i = 0; i < kFwdPerThread; ++i) {
            const Pair q = pair_of<kFwdUnits>(i, b0, u0, batch, hidden);
            if (q.live) early[i] = load_fwd_in(q, z, bias, c_prev, hidden);
        }
    }
    block_product(part, h_prev + static_cast<size_t>(b0) * h_ld, h_ld, batch - b0, hidden,
                  packed + static_cast<size_t>(blockIdx.x) * k_steps * 32 * (2 * kNTiles), aligned);
#pragma unroll
    for (int i = 0; i < kFwdPerThread; ++i) {
        const Pair q = pair_of<kFwdUnits>(i, b0, u0, batch, hidden);
        if (!q.live) continue;
        const FwdIn in = kFwdPrefetch ? early[kFwdPrefetch ? i : 0] : load_fwd_in(q, z, bias, c_prev, hidden);
        const float4 rec = sum_partials4(part, q.r, 4 * q.u);
        const float4 bj = in.bias;
        const float ai = sigmoidf((in.pre.x + rec.x) + bj.x), af = sigmoidf((in.pre.y + rec.y) + bj.y);
        const float ag = tanhf((in.pre.z + rec.z) + bj.z), ao = sigmoidf((in.pre.w + rec.w) + bj.w);
        const size_t cell = static_cast<size_t>(q.b) * hidden + q.j;
        const float c = af * in.c_prev + ai * ag;
        const float h = ao * tanhf(c);
        c_out[cell] = c;
        store_half(h_out + static_cast<size_t>(q.b) * y_ld + q.j, h);
        if (save_gates) {
            *reinterpret_cast<float4*>(z + static_cast<size_t>(q.b) * 4 * hidden + 4 * q.j) =
                make_float4(ai, af, ag, ao);
        }
        if (h_final) {
            store_half(h_final + cell, h);
            store_half(c_final + cell, c);
        }
    }
}

// ---- backward -------------------------------------------------------------------------------

// What the backward epilogue reads besides the product (all written by earlier launches).
struct BwdIn {
    float4 act;  // activated gates i, f, g, o saved by the forward
    float c_cur, c_prev, dy, dc;
};

__device__ __forceinline__ BwdIn load_bwd_in(const Pair& q, const float* gates, const float* c_cur,
                                             const float* c_prev, const float* dy, int dy_ld,
                                             const float* dc, int hidden) {
    const size_t cell = static_cast<size_t>(q.b) * hidden + q.j;
    BwdIn in;
    in.act = *reinterpret_cast<const float4*>(gates + static_cast<size_t>(q.b) * 4 * hidden + 4 * q.j);
    in.c_cur = c_cur[cell];
    in.c_prev = c_prev[cell];
    in.dy = dy[static_cast<size_t>(q.b) * dy_ld + q.j];
    in.dc = dc[cell];
    return in;
}

// One backward step for units [blockIdx.x * kBwdUnits, +kBwdUnits) x batch tile blockIdx.y:
// dh = dy + dz_next . W_hh[:, own units] (dz_next = dz of the step processed before, [B][4H]), then
// lstm_backward_step's math: writes dz (16-bit, gate-interleaved) and dc (in: dL/dc_t, out: dL/dc_{t-1}).
extern "C" __global__ void __launch_bounds__(kThreads)
fused_step_bwd(const unsigned int* __restrict__ packed, const half_bits* dz_next, int aligned,
               const float* gates, const float* c_cur, const float* c_prev, const float* dy, int dy_ld,
               float* dc, half_bits* dz, int batch, int hidden) {
    extern __shared__ float4 shared_words[];
    float* part = reinterpret_cast<float*>(shared_words);
    const int b0 = blockIdx.y * kRows, u0 = blockIdx.x * kBwdUnits;
    const int k_steps = (4 * hidden + 15) / 16;
    BwdIn early[kBwdPrefetch ? kBwdPerThread : 1];
    if constexpr (kBwdPrefetch) {
#pragma unroll
        for (int i = 0; i < kBwdPerThread; ++i) {
            const Pair q = pair_of<kBwdUnits>(i, b0, u0, batch, hidden);
            if (q.live) early[i] = load_bwd_in(q, gates, c_cur, c_prev, dy, dy_ld, dc, hidden);
        }
    }
    block_product(part, dz_next + static_cast<size_t>(b0) * 4 * hidden, 4 * hidden, batch - b0, 4 * hidden,
                  packed + static_cast<size_t>(blockIdx.x) * k_steps * 32 * (2 * kNTiles), aligned);
#pragma unroll
    for (int i = 0; i < kBwdPerThread; ++i) {
        const Pair q = pair_of<kBwdUnits>(i, b0, u0, batch, hidden);
        if (!q.live) continue;
        const BwdIn in = kBwdPrefetch ? early[kBwdPrefetch ? i : 0]
                                      : load_bwd_in(q, gates, c_cur, c_prev, dy, dy_ld, dc, hidden);
        const float dh_rec = sum_partials1(part, q.r, q.u);
        const float4 a = in.act;
        const float tanh_c = tanhf(in.c_cur);
        const float dh = in.dy + dh_rec;
        const float dcell = dh * a.w * (1.0f - tanh_c * tanh_c) + in.dc;
        const unsigned int lo = pack_pair<kBf16>(dcell * a.z * a.x * (1.0f - a.x),
                                                 dcell * in.c_prev * a.y * (1.0f - a.y));
        const unsigned int hi = pack_pair<kBf16>(dcell * a.x * (1.0f - a.z * a.z),
                                                 dh * tanh_c * a.w * (1.0f - a.w));
        *reinterpret_cast<uint2*>(dz + static_cast<size_t>(q.b) * 4 * hidden + 4 * q.j) = make_uint2(lo, hi);
        dc[static_cast<size_t>(q.b) * hidden + q.j] = dcell * a.y;
    }
}

}  // namespace fused_step
