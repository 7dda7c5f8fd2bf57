// v37 diagnostic (STEP_CLOCKS > 0): where a forward step's time goes. The first STEP_CLOCKS steps of every
// block leave SM clocks (%clock) and global times (%globaltimer, ns) at fixed points of the step in the
// module's global ecornn_step_clocks [block][step][kClockSlots], read by benchmarks/diag_step_clocks_v37.py.
// Thread 0 marks the step's top, the partials' barrier, the end of its pointwise work and the step's end;
// every warp's lane 0 marks its staged vector and its finished product. Compiled out at STEP_CLOCKS = 0.
// Needs NWARPS (the block's warps) defined before it is included.
#pragma once
#ifndef STEP_CLOCKS
#define STEP_CLOCKS 0
#endif
#ifndef STEP_CLOCK_BLOCKS
#define STEP_CLOCK_BLOCKS 264   // two directions of 132 SMs
#endif

// Thread 0's slots, then three per warp: staged (clock), product done (clock), staged (ns).
// v57: kMarkEntryNs, the kernel's entry (step 0's slot only): the prologue before step 0's top.
enum ClockSlot { kMarkTop = 0, kMarkPartials, kMarkPointwise, kMarkEnd, kMarkTopNs, kMarkPublishedNs, kMarkEntryNs,
                 kThreadMarks };
constexpr int kClockSlots = kThreadMarks + 3 * NWARPS;
__device__ __forceinline__ int staged_slot(int warp) { return kThreadMarks + warp; }
__device__ __forceinline__ int product_slot(int warp) { return kThreadMarks + NWARPS + warp; }
__device__ __forceinline__ int staged_ns_slot(int warp) { return kThreadMarks + 2 * NWARPS + warp; }

#if STEP_CLOCKS > 0
// The low 32 bits of each clock (a step's deltas are far below 2^32 cycles or ns), kept in shared memory
// until the loop ends: a mark is one clock read and one shared store, so marks inside the product add no
// live registers there (global stores in the loop spilled the 128-register B=8 split plan).
__device__ unsigned int ecornn_step_clocks[(size_t)STEP_CLOCK_BLOCKS * STEP_CLOCKS * kClockSlots];
__shared__ unsigned int step_marks[STEP_CLOCKS * kClockSlots];
#endif

// This thread sets slot `slot` of step `step`'s marks where `writer` (steps outside [0, STEP_CLOCKS), e.g. the
// backward's -1: none); `ns`: the global timer (ns) instead of the SM clock.
__device__ __forceinline__ void clock_mark(bool writer, int step, int slot, bool ns = false) {
#if STEP_CLOCKS > 0
    if (writer && (unsigned)step < STEP_CLOCKS) {
        unsigned int now;
        if (ns) asm volatile("mov.u32 %0, %%globaltimer_lo;" : "=r"(now));
        else asm volatile("mov.u32 %0, %%clock;" : "=r"(now));
        step_marks[step * kClockSlots + slot] = now;
    }
#endif
}

// Thread 0's mark, and a warp's (its lane 0).
__device__ __forceinline__ void block_mark(int step, int slot, bool ns = false) {
    clock_mark(threadIdx.x == 0, step, slot, ns);
}
__device__ __forceinline__ void warp_mark(int step, int slot, bool ns = false) {
    clock_mark(threadIdx.x % 32 == 0, step, slot, ns);
}

// After the loop: the block's marks of min(steps, STEP_CLOCKS) steps to global.
__device__ __forceinline__ void flush_marks(int steps) {
#if STEP_CLOCKS > 0
    __syncthreads();
    if (blockIdx.x >= STEP_CLOCK_BLOCKS) return;
    const int n = (steps < STEP_CLOCKS ? steps : STEP_CLOCKS) * kClockSlots;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        ecornn_step_clocks[(size_t)blockIdx.x * STEP_CLOCKS * kClockSlots + i] = step_marks[i];
#endif
}
