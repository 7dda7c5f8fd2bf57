// v53: the copy engine's bulk copies (cp.async.bulk, sm_90) into shared memory, completed on an mbarrier. A copy
// takes no registers and no load/store instructions of the issuing warp: one thread hands it over and the warps
// later wait on the barrier's phase. Only compiled for sm_90 and later.
#pragma once

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// One expected arrival per phase (the thread that arms it with the phase's byte count).
__device__ __forceinline__ void mbar_init(unsigned long long* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(shared_address(bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The arrival of this phase, expecting `bytes` from the copies issued after it.
__device__ __forceinline__ void mbar_arrive_expect(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(shared_address(bar)), "r"(bytes) : "memory");
}

// Shared memory this thread's warp read or wrote (generic proxy) before the copy engine (async proxy) writes it.
__device__ __forceinline__ void fence_before_bulk_writes() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global src to shared dst, counted on bar.
__device__ __forceinline__ void bulk_copy_to_shared(void* dst, const void* src, unsigned bytes,
                                                    unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 :: "r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar)) : "memory");
}

// Until bar's phase of the given parity has completed (its copies' bytes are visible to the waiting thread).
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(shared_address(bar)), "r"(parity) : "memory");
    }
}
