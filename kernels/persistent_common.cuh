// Device helpers shared by the persistent kernels (persistent_lstm.cu: grid, persistent_cluster.cu:
// cluster). Everything is parameterised explicitly (template arguments, or array extents deduced
// from the arguments), so a file may include this before or after its own constants.
//
// Packed tile and lane mapping (layouts/persistent.py: pack_block_rows): a block's tile is
// [NWARPS][COLS_PER_LANE][ROWS_PER_LANE][32]; lane = r * LaneK + kk; lane column i of warp w is
// k = w * WarpCols + i * LaneK + kk with WarpCols = COLS_PER_LANE * LaneK. The first RegCols
// columns of each lane live in registers w[r][i], the other SmemCols in shared memory w_s.
//
// ecornn.kernels.source() inlines this file into the text NVRTC compiles (no include path);
// nvcc resolves the #include relative to the .cu file.
#ifndef ECORNN_PERSISTENT_COMMON_CUH
#define ECORNN_PERSISTENT_COMMON_CUH

// The fp32 kernels' gate functions (one definition: same rounding in every kernel).
// v28, FAST_FP32_GATES=1: e = 2^(-|x| log2 e) on MUFU.EX2 and 1/(1 + e) on MUFU.RCP. The product's
// rounding moves e by ~|x| 2^-24 relative, the two approximations by ~2^-22: sigmoid within ~2^-21
// relative, tanh within ~2^-22 absolute (|x| keeps e <= 1, so nothing overflows; tanh's 1 - e is
// exact). v1-v27's expf / tanhf (FAST_FP32_GATES=0, the ablation) cost 0.05-0.33 us per step on
// the critical path of the step's pointwise (H200, split forwards at B=4-8).
#ifndef FAST_FP32_GATES
#define FAST_FP32_GATES 1
#endif

// v31, every grid.sync backward (v32: the fp32 grid and rows kernels too): the next step's inputs
// loaded after the barrier, not before it (its fence waited for them in flight); the tensor-core
// kernel also prefetches a 16-bit dy into L2 first.
#ifndef BWD_LATE_LOADS
#define BWD_LATE_LOADS 0
#endif

// e^(-|x|) and 1 / (1 + e^(-|x|)) on the hardware units.
__device__ __forceinline__ float exp_neg_abs(float x) {
    float e;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(-1.4426950408889634f * fabsf(x)));
    return e;
}

__device__ __forceinline__ float rcp_approx(float x) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
}

__device__ __forceinline__ float sigmoidf_(float z) {
    if (!FAST_FP32_GATES) return 1.0f / (1.0f + expf(-z));
    const float e = exp_neg_abs(z), s = rcp_approx(1.0f + e);   // sigmoid(|z|)
    return z >= 0.0f ? s : e * s;                               // sigmoid(-|z|) = e / (1 + e)
}

__device__ __forceinline__ float tanhf_(float x) {
    if (!FAST_FP32_GATES) return tanhf(x);
    const float e = exp_neg_abs(2.0f * x);
    return copysignf((1.0f - e) * rcp_approx(1.0f + e), x);
}

// v32/v33: four xw values of one row brought back from the fp16-split GEMM's scaled units
// (gpu_blas.matmul_fp16_split3 without its unscale pass), exact, as that pass is: the split and grid forwards.
__device__ __forceinline__ float4 unscaled(float4 v, int row_exp, int4 col_exp) {
    return make_float4(ldexpf(v.x, row_exp + col_exp.x), ldexpf(v.y, row_exp + col_exp.y),
                       ldexpf(v.z, row_exp + col_exp.z), ldexpf(v.w, row_exp + col_exp.w));
}

// The B values of one column k of a shared vector stored [k][b]: the widest aligned vector loads.
template <int B>
__device__ __forceinline__ void load_column(float (&v)[B], const float* p) {
    constexpr int kVec = (B % 4 == 0) ? 4 : ((B % 2 == 0) ? 2 : 1);
    if constexpr (kVec == 4) {
#pragma unroll
        for (int b = 0; b < B; b += 4) {
            const float4 q = *reinterpret_cast<const float4*>(p + b);
            v[b] = q.x; v[b + 1] = q.y; v[b + 2] = q.z; v[b + 3] = q.w;
        }
    } else if constexpr (kVec == 2) {
#pragma unroll
        for (int b = 0; b < B; b += 2) {
            const float2 q = *reinterpret_cast<const float2*>(p + b);
            v[b] = q.x; v[b + 1] = q.y;
        }
    } else {
#pragma unroll
        for (int b = 0; b < B; ++b) v[b] = p[b];
    }
}

// This lane's partial dot products over its columns (registers first, then shared memory) with
// the vector vec_s [k][B]: the inner loop of both kernels' matvec, in one fixed order.
template <int LaneK, int RegCols, int SmemCols, int R, int RA, int B>
__device__ __forceinline__ void lane_partials(const float (&w)[R][RA], const float* w_s, const float* vec_s,
                                              float (&acc)[R][B], int warp, int lane) {
    static_assert(RA == (RegCols > 0 ? RegCols : 1), "w must be [rows per lane][max(RegCols, 1)]");
    constexpr int kWarpCols = (RegCols + SmemCols) * LaneK;
    const int kk = lane % LaneK;
    const float* v = vec_s + (warp * kWarpCols + kk) * B;
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int b = 0; b < B; ++b) acc[r][b] = 0.0f;
#pragma unroll
    for (int i = 0; i < RegCols; ++i) {
        float hv[B];
        load_column(hv, v + i * LaneK * B);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int b = 0; b < B; ++b) acc[r][b] = fmaf(w[r][i], hv[b], acc[r][b]);
    }
    const float* ws = w_s + warp * SmemCols * R * 32 + lane;
#pragma unroll 4
    for (int i = 0; i < SmemCols; ++i) {
        float hv[B];
        load_column(hv, v + (RegCols + i) * LaneK * B);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float wv = ws[(i * R + r) * 32];
#pragma unroll
            for (int b = 0; b < B; ++b) acc[r][b] = fmaf(wv, hv[b], acc[r][b]);
        }
    }
}

// Sum the partials over the LaneK lanes that share a row (xor butterfly: every one gets the sum).
template <int LaneK, int R, int B>
__device__ __forceinline__ void lane_group_sum(float (&acc)[R][B]) {
#pragma unroll
    for (int off = 1; off < LaneK; off *= 2)
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int b = 0; b < B; ++b) acc[r][b] += __shfl_xor_sync(0xffffffffu, acc[r][b], off);
}

// Registers w and shared memory w_s get tile number `tile` of `tiles` (a block of Warps warps).
template <int Warps, int RegCols, int SmemCols, int R, int RA>
__device__ __forceinline__ void load_weights(float (&w)[R][RA], float* w_s, const float* tiles, size_t tile) {
    static_assert(RA == (RegCols > 0 ? RegCols : 1), "w must be [rows per lane][max(RegCols, 1)]");
    constexpr int kColsPerLane = RegCols + SmemCols;
    const float* src = tiles + tile * ((size_t)Warps * kColsPerLane * R * 32);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int i = 0; i < RegCols; ++i)
#pragma unroll
        for (int r = 0; r < R; ++r)
            w[r][i] = src[((warp * kColsPerLane + i) * R + r) * 32 + lane];
    if constexpr (SmemCols > 0) {
        constexpr int per_warp = SmemCols * R * 32;
        for (int idx = threadIdx.x; idx < Warps * per_warp; idx += 32 * Warps) {
            const int wi = idx / per_warp, rest = idx % per_warp;
            w_s[idx] = src[(wi * kColsPerLane + RegCols) * R * 32 + rest];
        }
    }
}

// What the backward pointwise step of one (unit j, batch b) needs at one timestep (prefetched a
// step ahead by both backward kernels): activated gates, c_t, c_{t-1} and the incoming dy.
struct BwdInputs {
    float4 g;
    float c, c_prev, dy;
};

// The saved part of BwdInputs (in.dy is left 0: load_bwd_inputs reads fp32 dy, the tensor-core
// backward fp32 or 16-bit dy, v31).
template <int Batch>
__device__ __forceinline__ BwdInputs load_bwd_saved(const float* gates, const float* cells, const float* c0,
                                                    int d, int T, int H, int step, bool reverse, int b, int j) {
    const int t = reverse ? T - 1 - step : step;
    const int tp = reverse ? t + 1 : t - 1;
    const size_t row = ((size_t)d * T + t) * Batch + b;
    BwdInputs in;
    in.g = __ldg(reinterpret_cast<const float4*>(gates + row * 4 * (size_t)H + 4 * (size_t)j));
    in.c = __ldg(cells + row * H + j);
    in.c_prev = step == 0 ? __ldg(c0 + ((size_t)d * Batch + b) * H + j)
                          : __ldg(cells + (((size_t)d * T + tp) * Batch + b) * H + j);
    in.dy = 0.0f;
    return in;
}

// Where dy of (direction d, step, batch b, unit j) lies in dy [T][Batch][ldy].
__device__ __forceinline__ size_t dy_index(int Batch, int d, int T, int H, int ldy, int step, bool reverse, int b,
                                           int j) {
    const int t = reverse ? T - 1 - step : step;
    return ((size_t)t * Batch + b) * ldy + (size_t)d * H + j;
}

template <int Batch>
__device__ __forceinline__ BwdInputs load_bwd_inputs(const float* gates, const float* cells,
                                                     const float* c0, const float* dy, int d, int T,
                                                     int H, int ldy, int step, bool reverse, int b, int j) {
    BwdInputs in = load_bwd_saved<Batch>(gates, cells, c0, d, T, H, step, reverse, b, j);
    in.dy = __ldg(dy + dy_index(Batch, d, T, H, ldy, step, reverse, b, j));
    return in;
}

// The backward pointwise step of one (unit, batch): dz_t (gates i, f, g, o) from dh (dy plus the
// recurrence), the saved activations and the cell gradient dc_next of the step after; dc gets the
// cell gradient of this step (the caller passes dc * f to the step before). tc = tanh(c_t),
// computed by the caller (accurate or fast).
__device__ __forceinline__ float4 pointwise_backward(const BwdInputs& in, float dh, float tc, float dc_next, float& dc) {
    const float gi = in.g.x, gf = in.g.y, gg = in.g.z, go = in.g.w;
    dc = dh * go * (1.0f - tc * tc) + dc_next;
    return make_float4(dc * gg * gi * (1.0f - gi), dc * in.c_prev * gf * (1.0f - gf),
                       dc * gi * (1.0f - gg * gg), dh * tc * go * (1.0f - go));
}

// v24: the grid's threads together ask L2 for every 128-byte line of [base, base + bytes). The
// in-kernel projections read x_t every step on the critical path; an x that a large write since
// evicted would be read from HBM each step (+65-88 us at bf16 H=1024 B=4 T=256 after an 8-32 MB
// write, notes v23). Lines already in L2 cost a hit. Not inlined: once per launch, and inlined
// into the fp32 grid forward's prologue it made ptxas spill a plan at the register cap.
#ifndef X_PREFETCH   // 0: the ablation (persistent.X_PREFETCH = False)
#define X_PREFETCH 1
#endif
__device__ __noinline__ void prefetch_to_l2(const void* base, size_t bytes) {
    const size_t lines = (bytes + 127) / 128, stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < lines; i += stride)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(static_cast<const char*>(base) + i * 128));
}

// ---- the tagged exchange between blocks (persistent_mma.cu v5, persistent_lstm.cu v6) ----
// Relaxed gpu-scope accesses: coherent at L2 (no stale L1 line), and asm volatile, so a polling
// loop really reloads.
__device__ __forceinline__ uint4 load_relaxed(const unsigned int* p) {
    uint4 v;
    asm volatile("ld.relaxed.gpu.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned int load_relaxed_word(const unsigned int* p) {
    unsigned int v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Acquire: what the releasing block stored before its release is visible after (the split grid
// barrier of persistent_mma.cu, v12).
__device__ __forceinline__ unsigned int load_acquire_word(const unsigned int* p) {
    unsigned int v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void store_relaxed(unsigned int* p, unsigned int v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" :: "l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void store_relaxed4(unsigned int* p, const uint4& v) {
    asm volatile("st.relaxed.gpu.global.v4.u32 [%0], {%1, %2, %3, %4};"
                 :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// Polls beyond this mean a producer never published (a bug, not a slow block: ~seconds of
// polling): trap, so the launch fails with an error instead of hanging.
constexpr long long kMaxPolls = 1ll << 26;

#endif  // ECORNN_PERSISTENT_COMMON_CUH
