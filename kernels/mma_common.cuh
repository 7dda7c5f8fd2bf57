// Tensor-core helpers shared by the 16-bit kernels: mma.sync.m16n8k16 with fp16 or bf16 inputs and
// fp32 accumulation (sm_80+), and packing two fp32 values into one 16-bit pair. Raw PTX and 32-bit
// registers only, so NVRTC needs no cuda_fp16.h / cuda_bf16.h.
//
// Fragment map of m16n8k16 (PTX ISA "Matrix Fragments for mma.m16n8k16", 16-bit A/B, fp32 C/D);
// g = lane / 4, c = lane % 4; a register holds two 16-bit values, the lower column in the low half:
//   A (16 x 16, row-major rows m, columns k): a0 = A[g][2c, 2c+1]     a1 = A[g+8][2c, 2c+1]
//                                             a2 = A[g][2c+8, 2c+9]   a3 = A[g+8][2c+8, 2c+9]
//   B (16 x 8, k x n):                        b0 = B[2c, 2c+1][g]     b1 = B[2c+8, 2c+9][g]
//   C (16 x 8, fp32):                         c0, c1 = C[g][2c, 2c+1] c2, c3 = C[g+8][2c, 2c+1]
// So with the vector stored n-major ([n][k], k contiguous), b0 and b1 are single 32-bit loads.
#ifndef ECORNN_MMA_COMMON_CUH
#define ECORNN_MMA_COMMON_CUH

// Two fp32 values as one 16-bit pair (round to nearest even): `lo` in bits 0..15, `hi` in 16..31.
template <bool Bf16>
__device__ __forceinline__ unsigned int pack_pair(float lo, float hi) {
    unsigned int d;
    if constexpr (Bf16) {
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    } else {
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    }
    return d;
}

// One 16-bit value (raw bits) as fp32.
template <bool Bf16>
__device__ __forceinline__ float unpack_half(unsigned short bits) {
    if constexpr (Bf16) {
        return __uint_as_float(static_cast<unsigned int>(bits) << 16);
    } else {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
        return f;
    }
}

// d += A . B for one 16 x 8 x 16 tile (accumulating in place).
template <bool Bf16>
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned int (&a)[4], unsigned int b0,
                                          unsigned int b1) {
    if constexpr (Bf16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

#endif  // ECORNN_MMA_COMMON_CUH
