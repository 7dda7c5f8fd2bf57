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

// ---- v43 (st.async handoffs; v54b: the paired input product's partner sums) ----

// Initialise the mbarrier `bar` for `count` arrivals per phase; the fence publishes it to the cluster's other blocks
// (their st.async complete on it), so a cluster barrier must follow before the first of them.
__device__ __forceinline__ void mbarrier_init_for_cluster(unsigned long long* bar, unsigned count) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(addr), "r"(count) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#else
    __trap();
#endif
}

// This thread's arrival on `bar` (of this block), announcing `bytes` of st.async writes for the current phase
// (they may have completed already: the transaction count goes negative until then).
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(unsigned long long* bar, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
    asm volatile("{\n\t.reg .b64 state;\n\t"
                 "mbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n\t}" :: "r"(addr), "r"(bytes) : "memory");
#else
    __trap();
#endif
}

// Wait (acquire, cluster scope) until `bar` completed its phase of parity `parity`; traps after max_polls polls
// (a missing write must not hang the kernel).
__device__ __forceinline__ void mbarrier_wait_parity(unsigned long long* bar, unsigned parity, long long max_polls) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(bar));
    unsigned done = 0;
    for (long long polls = 0; !done; ++polls) {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(addr), "r"(parity) : "memory");
        if (polls > max_polls) __trap();
    }
#else
    __trap();
#endif
}

// Write v at `local`'s offset in block `rank`, completing 4 bytes on that block's mbarrier at `bar`'s offset: the
// receiver learns of the write from its own mbarrier, with no fence or barrier on this side.
__device__ __forceinline__ void store_async(float* local, unsigned rank, float v, unsigned long long* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];"
                 :: "r"(remote_shared(local, rank)), "f"(v), "r"(remote_shared(bar, rank)) : "memory");
#else
    __trap();
#endif
}

// v54b: the same for four floats (16-byte aligned), 16 bytes on the mbarrier.
__device__ __forceinline__ void store_async4(float* local, unsigned rank, float4 v, unsigned long long* bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];"
                 :: "r"(remote_shared(local, rank)), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w),
                    "r"(remote_shared(bar, rank)) : "memory");
#else
    __trap();
#endif
}
