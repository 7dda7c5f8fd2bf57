// A graph replay's inputs (v17): the caller's x, h0 and c0 copied into the graph's own input
// buffers by one kernel launch instead of three cudaMemcpyAsync calls (~5 us of host time each
// before the graph launch on the H100 host: benchmarks/profile_replay_host.py). Sources and
// destinations start 16-byte aligned (the host checks; memcpys otherwise); n0..n2 are byte counts.
__device__ __forceinline__ void copy_part(long long i, char* dst, const char* src, long long bytes) {
    const long long words = bytes / 16;
    if (i < words) {
        reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    } else if (i == words) {   // the last bytes % 16 bytes
        for (long long b = 16 * words; b < bytes; ++b) dst[b] = src[b];
    }
}

extern "C" __global__ void copy_three(char* d0, const char* __restrict__ s0, long long n0,
                                      char* d1, const char* __restrict__ s1, long long n1,
                                      char* d2, const char* __restrict__ s2, long long n2) {
    const long long w0 = n0 / 16 + 1, w1 = n1 / 16 + 1, w2 = n2 / 16 + 1;   // + 1: the tail's thread
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < w0 + w1 + w2; i += stride) {
        if (i < w0) copy_part(i, d0, s0, n0);
        else if (i < w0 + w1) copy_part(i - w0, d1, s1, n1);
        else copy_part(i - w0 - w1, d2, s2, n2);
    }
}

// v20: the same copies captured in the graph, their sources read at run time from a ring of slots
// in mapped host memory ({tag, x, h0, c0} addresses; v56: then the output delta), which the host fills before each
// launch with plain stores instead of a kernel launch (ecornn/engines/persistent_replay_ring.py).
// fetch_slot (one warp) reads slot state[0] % slots over the bus once, its slot_words words in parallel
// (reads of host memory cost ~1 us each and queue behind one another: every block reading them
// itself cost 2-4 ms per launch), checks its tag, leaves {x, h0, c0, ok, delta} in device memory
// (current), advances the count state[0] (v56: on a matching tag only, below) and reports it to the host (done[0]).
// A slot whose tag is not the count (the graph was launched around the ring) reports it in done[1], and copy_current
// then fills the buffers with 0xff bytes (NaN in fp32, fp16, bf16): never another call's inputs.
// delta (v56): bytes from the graph's packed output buffer to the caller's new one, where the forward kernel writes
// its outputs (persistent_mma.cu, output_delta); 0 after a wrong tag, so such a launch writes only the graph's own.
// v56: state[0] counts the slots fetched, not the launches run: it advances on a matching tag only. A launch around
// the ring then either finds the next slot unpublished (NaN, the graph's own buffers) or takes the next call's slot
// and computes that call's outputs into that call's buffer, its own launch then finding no slot. Either way every
// published slot is fetched, once, in order, with its inputs and its output buffer together: no caller's new output
// buffer is left unwritten (with a count of launches, a launch around the ring shifted every later fetch by one).
extern "C" __global__ void fetch_slot(const volatile long long* ring, unsigned long long* state,
                                      volatile unsigned long long* done, int slots, int slot_words,
                                      long long* current) {
    const int lane = threadIdx.x;
    const unsigned long long seq = state[0];
    const long long word = lane < slot_words ? ring[(long long)slot_words * (seq % slots) + lane] : 0;
    const bool ok = __shfl_sync(0xffffffffu, word, 0) == static_cast<long long>(seq);
    if (lane >= 1 && lane < 4) current[lane - 1] = ok ? word : 0;
    if (lane == 4) current[4] = ok ? word : 0;
    if (lane == 0) {
        current[3] = ok;
        if (ok) {
            state[0] = seq + 1;
            done[0] = seq + 1;
        } else {
            done[1] = seq + 1;
        }
        __threadfence_system();
    }
}

__device__ __forceinline__ void copy_or_fill(long long i, long long stride, char* dst, const char* src,
                                             long long bytes, bool ok, bool by_reference) {
    if (ok && by_reference) return;   // v21: the kernel reads this input at its fetched address
    if (ok && reinterpret_cast<unsigned long long>(src) % 16 == 0) {
        for (long long w = i; w <= bytes / 16; w += stride) copy_part(w, dst, src, bytes);
    } else {   // a source off 16-byte alignment goes bytewise
        for (long long b = i; b < bytes; b += stride) dst[b] = ok ? src[b] : char(0xff);
    }
}

// by_reference (v21): bit k set = input k is read where it is by the graph's kernel, so it is not
// copied, only NaN-filled in its buffer after a wrong tag (the kernel then reads the buffer).
extern "C" __global__ void copy_current(const long long* current, int by_reference, char* d0, long long n0,
                                        char* d1, long long n1, char* d2, long long n2) {
    const bool ok = current[3] != 0;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    copy_or_fill(i, stride, d0, reinterpret_cast<const char*>(current[0]), n0, ok, by_reference & 1);
    copy_or_fill(i, stride, d1, reinterpret_cast<const char*>(current[1]), n1, ok, by_reference & 2);
    copy_or_fill(i, stride, d2, reinterpret_cast<const char*>(current[2]), n2, ok, by_reference & 4);
}
