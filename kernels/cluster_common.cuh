// Thread-block cluster primitives (sm_90+), shared by the cluster kernel (v3, persistent_cluster.cu) and the
// tensor-core forward on clusters (v42, persistent_mma.cu). Before sm_90 they trap: the engine launches no clustered
// build there (the sm_80 compiles keep the CI's check of every source).

// This block's rank in its cluster.
__device__ __forceinline__ unsigned cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
#else
    __trap();
    return 0;
#endif
}

// Full cluster barrier, split so that independent work can sit between arrive (release) and wait (acquire).
__device__ __forceinline__ void cluster_arrive() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
#else
    __trap();
#endif
}

__device__ __forceinline__ void cluster_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#else
    __trap();
#endif
}

// The shared::cluster address of `local`'s offset in block `rank` of this cluster.
__device__ __forceinline__ unsigned remote_shared(const void* local, unsigned rank) {
    unsigned remote = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(local));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
#else
    __trap();
#endif
    return remote;
}

// Store v (one float, or four: 16-byte aligned) at the same shared-memory offset as `local`, in block `rank`.
__device__ __forceinline__ void store_remote(float* local, unsigned rank, float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("st.shared::cluster.f32 [%0], %1;" :: "r"(remote_shared(local, rank)), "f"(v) : "memory");
#endif
}

__device__ __forceinline__ void store_remote4(float* local, unsigned rank, float4 v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};"
                 :: "r"(remote_shared(local, rank)), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
#endif
}
