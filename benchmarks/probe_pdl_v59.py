"""v59 probe: does programmatic dependent launch (PDL) let a persistent-style kernel's prologue run under the tail of
the projection GEMM before it, in a captured graph? fp32 H=1024 B=8's forward spends ~4.5 µs in its prologue (W_hh's
tiles, 128 KB per SM) after the GEMM's last block; the graph's gap between the two nodes is ~1 µs more.

A stand-in: cuBLAS's fp16 GEMM of the fp32 split projection's shape (M = T B = 2048, N = 4H = 4096, K = 3H = 3072),
then 128 blocks (one per SM: 200 KB of shared memory) that each load 128 KB of a 16 MB buffer (the prologue), wait
on the grid dependency (griddepcontrol.wait: a no-op without PDL) and read the GEMM's output. Graphs of the two,
replayed after a sync (events around each, as the benches time a call), median µs:
  plain: an ordinary launch; pdl-late: launched with programmatic stream serialization, waiting after the prologue;
  pdl-first: the same, waiting first (the launch latency only); gemm / kernel alone.

    python benchmarks/probe_pdl_v59.py OUT_DIR
"""
from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import numpy as np

SOURCE = r"""
extern "C" __global__ void secondary(const float4* __restrict__ weights, const float* __restrict__ gemm_out,
                                     float* __restrict__ out, int wait_first, int tiles) {
    extern __shared__ float4 smem[];
    if (wait_first) asm volatile("griddepcontrol.wait;" ::: "memory");
    const float4* w = weights + (size_t)blockIdx.x * tiles;
    for (int i = threadIdx.x; i < tiles; i += blockDim.x) smem[i] = w[i];
    __syncthreads();
    if (!wait_first) asm volatile("griddepcontrol.wait;" ::: "memory");
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = gemm_out[i] + smem[threadIdx.x].x + smem[tiles - 1 - threadIdx.x].y;
}
"""
BLOCKS, THREADS, TILES = 128, 256, 8192        # 8192 float4 = 128 KB a block
SMEM = 200 * 1024
PSS = 6                                        # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


class LaunchAttribute(ctypes.Structure):       # CUlaunchAttribute: id, padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_int), ("value", ctypes.c_int * 16)]


class LaunchConfig(ctypes.Structure):          # CUlaunchConfig
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


def launch_ex(lib, function_ptr, stream_ptr, args, pdl: bool):
    """cuLaunchKernelEx of the probe kernel (args: device pointers and ints), with PDL's attribute or none."""
    values = [ctypes.c_void_p(a) if kind == "p" else ctypes.c_int(a) for kind, a in args]
    params = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    attr = LaunchAttribute(PSS, 0)
    attr.value[0] = 1
    config = LaunchConfig(BLOCKS, 1, 1, THREADS, 1, 1, SMEM, ctypes.c_void_p(stream_ptr),
                          ctypes.pointer(attr) if pdl else None, 1 if pdl else 0)
    rc = lib.cuLaunchKernelEx(ctypes.byref(config), ctypes.c_void_p(function_ptr), params, None)
    if rc != 0:
        raise RuntimeError(f"cuLaunchKernelEx: error {rc}")


def main(argv=None):
    import cupy as cp
    out_dir = Path((argv or sys.argv[1:])[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    lib = ctypes.CDLL("libcuda.so.1")
    kern = cp.RawKernel(SOURCE, "secondary", options=("-std=c++17",))
    kern.max_dynamic_shared_size_bytes = SMEM
    rng = np.random.default_rng(0)
    a = cp.asarray(rng.standard_normal((2048, 3072), np.float32)).astype(cp.float16)
    b = cp.asarray(rng.standard_normal((3072, 4096), np.float32)).astype(cp.float16)
    c = cp.empty((2048, 4096), cp.float32)   # fp32 out, as the engine's projection
    weights = cp.asarray(rng.standard_normal(BLOCKS * TILES * 4, np.float32))
    gemm_out = cp.asarray(rng.standard_normal(BLOCKS * THREADS, np.float32))
    out = cp.empty(BLOCKS * THREADS, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)

    def kernel(pdl, wait_first):
        args = [("p", weights.data.ptr), ("p", gemm_out.data.ptr), ("p", out.data.ptr), ("i", int(wait_first)),
                ("i", TILES)]
        kern((BLOCKS,), (THREADS,), (weights, gemm_out, out, np.int32(0), np.int32(TILES)), shared_mem=SMEM)  # compile
        return lambda: launch_ex(lib, kern.kernel.ptr, stream.ptr, args, pdl)

    def graph_of(*steps):
        with stream:
            for step in steps:   # warm (cuBLAS handle, the kernel built) before capturing
                step()
            stream.synchronize()
            stream.begin_capture()
            for step in steps:
                step()
            return stream.end_capture()

    from ecornn import gpu_blas   # CuPy's matmul refuses stream capture; the engine's cuBLAS calls do not
    gemm = lambda: gpu_blas.matmul(a, b, c, a_type="float16", stream=stream)  # noqa: E731
    graphs = {
        "gemm": graph_of(gemm),
        "kernel": graph_of(kernel(False, False)),
        "plain": graph_of(gemm, kernel(False, False)),
        "pdl-late": graph_of(gemm, kernel(True, False)),
        "pdl-first": graph_of(gemm, kernel(True, True)),
    }
    results = {name: [] for name in graphs}
    for _ in range(6):   # rounds, modes alternated
        for name, graph in graphs.items():
            times = []
            for _ in range(60):
                stream.synchronize()
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                start.record(stream)
                graph.launch(stream=stream)
                stop.record(stream)
                stop.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
            results[name].append(float(np.median(times[5:])))
    summary = {name: float(np.median(v)) for name, v in results.items()}
    lines = ["| graph | median µs (rounds) |", "|---|---|"]
    lines += [f"| {n} | {summary[n]:.2f} ({', '.join(f'{t:.2f}' for t in results[n])}) |" for n in graphs]
    text = "\n".join(lines)
    print(text)
    (out_dir / "probe_pdl_v59.md").write_text(text + "\n")
    (out_dir / "probe_pdl_v59.json").write_text(json.dumps({"rounds": results, "median": summary}, indent=1))


if __name__ == "__main__":
    main()
