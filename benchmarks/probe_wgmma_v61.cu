// v61 probe: one block's 64 x 8 x 1024 fp16 product per step (the grouped fp16 H=1024 B=16 forward's product: 16
// units' 4 gates by a batch group of 8 columns), by mma.sync (the kernels' way) or by Hopper's warpgroup MMA
// (wgmma.mma_async m64n8k16, sm_90a only), A in registers or in shared memory. Each step: the product, its partial
// sums through shared memory, one sum per output; every block computes the same product (one block per SM).
//
//   variant 0: mma.sync, A in registers   8 warps, each K/8 (8 k-tiles x 4 m-tiles, 128 registers)
//   variant 1: mma.sync, A by ldmatrix    the same, A read from shared memory each step
//   variant 2: wgmma, A in registers      2 warpgroups, each K/2 (32 k-steps; warp w%4 holds rows 16(w%4)..)
//   variant 3: wgmma, A in shared memory  the same, A and B by matrix descriptors (no swizzle, core matrices)
//   variant 6: mma.sync, A as the kernels hold shared-memory tiles: each lane's fragment one uint4 ([kt][mt][lane]),
//              plain loads the compiler may hoist, k-tiles unrolled by 2 (persistent_mma.cu's smem_tile_products)
//   variants 4, 5: as 2, 3 with 4 accumulator chains per warpgroup (k-step kt into chain kt % 4), whose wgmmas
//   do not wait for each other (a chain of 32 dependent wgmmas is latency-bound)
// x (B) sits in shared memory as 8-column core matrices ([K/8][8 n][8 k]) for wgmma, n-major rows for mma.sync.
// `swap` swaps the descriptors' leading and stride byte offsets (which is which is checked by the results).
#include <cstdint>

#define K_TOTAL 1024
#define ROWS 64
#define COLS 8
#define XPAD 8   // halves of padding per row of the n-major x and of A for ldmatrix (bank conflicts)

__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint64_t smem_desc(const void* p, unsigned lbo, unsigned sbo) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(p);
    uint64_t d = (uint64_t)((addr & 0x3FFFF) >> 4);
    d |= (uint64_t)((lbo & 0x3FFFF) >> 4) << 16;
    d |= (uint64_t)((sbo & 0x3FFFF) >> 4) << 32;
    return d;   // base offset 0, no swizzle
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// d (+)= A . B; `accumulate` 0 ignores d's old values (a chain's first k-step: d needs no zeroing, so no ordinary
// instruction writes d between the fence and the wgmma, which would make ptxas wait for the warpgroup)
__device__ __forceinline__ void wgmma_rs(float (&d)[4], const unsigned (&a)[4], uint64_t b, int accumulate) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %9, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_ss(float (&d)[4], uint64_t a, uint64_t b, int accumulate) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(a), "l"(b), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_wait() {
    asm volatile("wgmma.commit_group.sync.aligned;\n wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
#endif

// a: [ROWS][K] fp16 as 32-bit pairs; x: [COLS][K] fp16 as pairs; out: [ROWS][COLS] fp32 of block 0 (last step).
template <int V>
__global__ void __launch_bounds__(256, 1) product_steps(const unsigned* __restrict__ a,
                                                        const unsigned* __restrict__ x, float* out,
                                                        long long* cycles, int steps, int swap) {
    extern __shared__ __align__(128) unsigned char smem[];
    float* partial = reinterpret_cast<float*>(smem);                         // [8][ROWS][COLS]
    unsigned short* xs = reinterpret_cast<unsigned short*>(smem + 8 * ROWS * COLS * 4);
    constexpr bool wg = V >= 2 && V <= 5;   // a wgmma variant
    const int x_halves = wg ? K_TOTAL * COLS : COLS * (K_TOTAL + XPAD);
    unsigned short* as = xs + x_halves;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const unsigned short* a16 = reinterpret_cast<const unsigned short*>(a);
    const unsigned short* x16 = reinterpret_cast<const unsigned short*>(x);

    // x into shared memory: n-major padded rows (mma.sync) or [K/8][8 n][8 k] core matrices (wgmma)
    for (int i = threadIdx.x; i < COLS * K_TOTAL; i += blockDim.x) {
        const int n = i / K_TOTAL, k = i % K_TOTAL;
        xs[wg ? (k / 8) * 64 + n * 8 + k % 8 : n * (K_TOTAL + XPAD) + k] = x16[i];
    }
    if (V == 1) {
        for (int i = threadIdx.x; i < ROWS * K_TOTAL; i += blockDim.x)
            as[(i / K_TOTAL) * (K_TOTAL + XPAD) + i % K_TOTAL] = a16[i];
    }
    if (V == 6) {   // per warp: [kt (8)][mt (4)][lane (32)] uint4, the lane's A fragment of m16n8k16
        uint4* frag = reinterpret_cast<uint4*>(as);
        for (int i = threadIdx.x; i < 8 * 8 * 4 * 32; i += blockDim.x) {
            const int w = i / 1024, kt = (i / 128) % 8, mt = (i / 32) % 4, l = i % 32, gg = l / 4, cc = l % 4;
            const unsigned* base = a + ((mt * 16 + gg) * K_TOTAL + w * (K_TOTAL / 8) + kt * 16 + 2 * cc) / 2;
            frag[i] = make_uint4(base[0], base[4 * K_TOTAL], base[4], base[4 * K_TOTAL + 4]);
        }
    }
    if (V == 3 || V == 5) {   // per warpgroup half of K: [kc (64)][mg (8)][8 rows][8 k], kc = k / 8 within the half
        for (int i = threadIdx.x; i < ROWS * K_TOTAL; i += blockDim.x) {
            const int m = i / K_TOTAL, k = i % K_TOTAL, half = k / (K_TOTAL / 2), kk = k % (K_TOTAL / 2);
            as[half * ROWS * (K_TOTAL / 2) + ((kk / 8) * 8 + m / 8) * 64 + (m % 8) * 8 + kk % 8] = a16[i];
        }
    }
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
    __syncthreads();

    constexpr int KT = wg ? 32 : 8;
    constexpr int CH = V >= 4 ? 4 : 1;
    constexpr bool in_regs = V == 0 || V == 2 || V == 4;   // k-steps of 16 per warp (mma.sync) or per warpgroup (wgmma)
    unsigned areg[in_regs ? KT : 1][V == 0 ? 4 : 1][4];
    const int k_base = wg ? (warp / 4) * (K_TOTAL / 2) : warp * (K_TOTAL / 8);
    if (in_regs) {   // the A fragments of mma.m16n8k16: rows m0 + g (+8), columns k0 + 2c (+8)
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
            for (int mt = 0; mt < (V == 0 ? 4 : 1); ++mt) {
                const int m0 = V == 0 ? mt * 16 : (warp % 4) * 16, k0 = k_base + kt * 16;
                const unsigned* base = a + ((m0 + g) * K_TOTAL + k0 + 2 * c) / 2;
                areg[kt][mt][0] = __ldg(base);
                areg[kt][mt][1] = __ldg(base + 4 * K_TOTAL);
                areg[kt][mt][2] = __ldg(base + 4);
                areg[kt][mt][3] = __ldg(base + 4 * K_TOTAL + 4);
            }
    }
    float keep = 0.f;
    long long start = 0;
    for (int step = 0; step <= steps; ++step) {
        if (step == 1) start = clock64();   // step 0 warms up
        if (V <= 1 || V == 6) {
            float acc[4][4] = {};
            const unsigned* xrow = reinterpret_cast<const unsigned*>(xs + g * (K_TOTAL + XPAD));
#pragma unroll(V == 6 ? 2 : KT)
            for (int kt = 0; kt < KT; ++kt) {
                const int k0 = k_base + kt * 16;
                const unsigned b0 = xrow[(k0 + 2 * c) / 2], b1 = xrow[(k0 + 2 * c + 8) / 2];
#pragma unroll
                for (int mt = 0; mt < 4; ++mt) {
                    unsigned f[4];
                    if (V == 6) {
                        const uint4 q = reinterpret_cast<const uint4*>(as)[((warp * 8 + kt) * 4 + mt) * 32 + lane];
                        f[0] = q.x; f[1] = q.y; f[2] = q.z; f[3] = q.w;
                    } else if (V == 0) {
                        f[0] = areg[kt][mt][0]; f[1] = areg[kt][mt][1]; f[2] = areg[kt][mt][2]; f[3] = areg[kt][mt][3];
                    } else {
                        const unsigned short* row = as + (mt * 16 + lane % 16) * (K_TOTAL + XPAD) + k0 + (lane / 16) * 8;
                        const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
                        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                                     : "=r"(f[0]), "=r"(f[1]), "=r"(f[2]), "=r"(f[3]) : "r"(addr));
                    }
                    mma_16816(acc[mt], f, b0, b1);
                }
            }
#pragma unroll
            for (int mt = 0; mt < 4; ++mt) {
                float* p = partial + warp * ROWS * COLS + (mt * 16 + g) * COLS + 2 * c;
                p[0] = acc[mt][0]; p[1] = acc[mt][1]; p[8 * COLS] = acc[mt][2]; p[8 * COLS + 1] = acc[mt][3];
            }
        } else {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
            float acc[CH][4];
            const unsigned lbo_x = swap ? 256 : 128, sbo_x = swap ? 128 : 256;
            const unsigned lbo_a = swap ? 128 : 1024, sbo_a = swap ? 1024 : 128;
            const unsigned short* a_half = as + (warp / 4) * ROWS * (K_TOTAL / 2);
            wgmma_fence();
#pragma unroll
            for (int kt = 0; kt < KT; ++kt) {
                const uint64_t bd = smem_desc(xs + ((k_base / 8) + 2 * kt) * 64, lbo_x, sbo_x);
                if (in_regs) {
                    wgmma_rs(acc[kt % CH], areg[kt][0], bd, kt >= CH);
                } else {
                    wgmma_ss(acc[kt % CH], smem_desc(a_half + 2 * kt * 8 * 64, lbo_a, sbo_a), bd, kt >= CH);
                }
            }
            wgmma_commit_wait();
#pragma unroll
            for (int ch = 0; ch < CH; ++ch) {
                float* p = partial + ((warp / 4) * CH + ch) * ROWS * COLS + ((warp % 4) * 16 + g) * COLS + 2 * c;
                p[0] = acc[ch][0]; p[1] = acc[ch][1]; p[8 * COLS] = acc[ch][2]; p[8 * COLS + 1] = acc[ch][3];
            }
#endif
        }
        __syncthreads();
        float sum[2] = {0.f, 0.f};   // thread t: outputs 2t, 2t+1
#pragma unroll
        for (int s = 0; s < (wg ? 2 * CH : 8); ++s) {
            sum[0] += partial[s * ROWS * COLS + 2 * threadIdx.x];
            sum[1] += partial[s * ROWS * COLS + 2 * threadIdx.x + 1];
        }
        keep += sum[0] + sum[1];
        if (step == steps && blockIdx.x == 0) {
            out[2 * threadIdx.x] = sum[0];
            out[2 * threadIdx.x + 1] = sum[1];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - start;
    if (keep == 1.2345f) out[0] = keep;   // never: keeps every step's sums live
}

template __global__ void product_steps<0>(const unsigned*, const unsigned*, float*, long long*, int, int);
template __global__ void product_steps<1>(const unsigned*, const unsigned*, float*, long long*, int, int);
template __global__ void product_steps<2>(const unsigned*, const unsigned*, float*, long long*, int, int);
template __global__ void product_steps<3>(const unsigned*, const unsigned*, float*, long long*, int, int);
template __global__ void product_steps<4>(const unsigned*, const unsigned*, float*, long long*, int, int);
template __global__ void product_steps<5>(const unsigned*, const unsigned*, float*, long long*, int, int);
template __global__ void product_steps<6>(const unsigned*, const unsigned*, float*, long long*, int, int);
