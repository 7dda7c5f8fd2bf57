"""Probe (v20): GPU µs per graph node of the replay ring's fetch_slot (one warp reading a slot of mapped
host memory), copy_current (the input copy from device memory) and an empty kernel, each captured
N times in a row into one graph and replayed back to back. Then whole forward graphs (T=256,
H=1024 B=4 bf16: the kernel reads x itself; H=512 B=4 fp32: the projection GEMM does) captured with
their input nodes varied, replayed back to back: v20 (fetch_slot, copy_current), copy_current
alone, fetch_slot alone, no input node (timing only: stale inputs), and v17's graph (no input
node; its copy kernel runs outside the graph, not timed here), and v20 with the input nodes'
preferred shared-memory carveout at 100% (the SMs keep the persistent kernel's configuration). Prints a table; writes OUT_DIR/probe_fetch_nodes.json.

    python tools/probe_fetch_nodes.py OUT_DIR
"""
import json
import sys
from pathlib import Path

import cupy as cp
import numpy as np

from ecornn.engines import persistent_replay_ring as ring_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from profile_whole_call import _gpu_us  # noqa: E402  (GPU µs per call, back to back)

REPS, NODES = 30, 20


def graph_of(fn, nodes):
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        for _ in range(nodes):
            fn()
        return stream.end_capture(), stream


def per_node_us(fn, nodes=NODES):
    graph, stream = graph_of(fn, nodes)
    with stream:   # _gpu_us records its events on the current stream
        return _gpu_us(lambda: graph.launch(stream=stream), REPS) / nodes


def forward_graph_us(cell, repeats=30):
    from bench_persistent import _problem
    from ecornn.engines import persistent, persistent_graph
    config, weights, x, h0, c0 = _problem(*cell)
    prepared = persistent.prepare(config, weights)
    persistent_graph._copy_kernel(cp.cuda.runtime.getDevice())   # compiled before any capture
    real = ring_module.InputRing.capture_fetch
    variants = {"v20": real, "copy only": "copy", "fetch only": "fetch", "no input node": None, "v17": "v17",
                "v20, input nodes at carveout 100": real}
    out = {}
    for name, variant in variants.items():
        for kernel in ring_module._fetch_kernels_for(cp.cuda.runtime.getDevice()):
            kernel.preferred_shared_memory_carveout = 100 if "carveout" in name else -1
        prepared.graphs.clear()
        persistent_graph.INPUTS_BY_REFERENCE = variant != "v17"
        ring_module.InputRing.capture_fetch = _input_nodes(variant, real)
        try:
            for _ in range(2):
                persistent.forward(config, x, weights, h0, c0, prepared=prepared)
        finally:
            ring_module.InputRing.capture_fetch = real
            persistent_graph.INPUTS_BY_REFERENCE = True
        (entry,) = prepared.graphs.values()
        stream = cp.cuda.get_current_stream()
        launch = (lambda: entry.launch_bare(stream)) if variant is real else (lambda: entry.graph.launch(stream=stream))
        out[name] = _gpu_us(launch, repeats)
    prepared.graphs.clear()
    return out


def _input_nodes(variant, real):
    """capture_fetch replaced by the variant's nodes (copy only: v17's copy kernel from each buffer
    onto itself, the same bytes moved as copy_current's)."""
    def capture(ring):
        device = cp.cuda.runtime.getDevice()
        if variant == "fetch":
            fetch_slot, _ = ring_module._fetch_kernels_for(device)
            fetch_slot((1,), (32,), (np.uint64(ring.host.device_ptr), ring.state,
                                     np.uint64(ring.host.device_ptr + 8 * 4 * ring.slots), np.int32(ring.slots),
                                     ring.current))
        elif variant == "copy":
            from ecornn.engines import persistent_graph
            persistent_graph._copy_inputs(ring.buffers, ring.buffers, cp.cuda.get_current_stream())
    return real if variant is real else capture


def main(out):
    x = cp.random.standard_normal((256, 4, 1024), dtype=cp.float32).astype(cp.float16)
    h0, c0 = (cp.random.standard_normal((1, 4, 1024), dtype=cp.float32).astype(cp.float16) for _ in range(2))
    buffers = tuple(cp.empty_like(a) for a in (x, h0, c0))
    ring = ring_module.InputRing(buffers)
    fetch_slot, copy_current = ring_module._fetch_kernels_for(cp.cuda.runtime.getDevice())
    host = np.uint64(ring.host.device_ptr)
    done = np.uint64(ring.host.device_ptr + 8 * 4 * ring.slots)
    device_words = cp.zeros(4 * ring.slots + 2, cp.int64)
    empty = cp.RawKernel('extern "C" __global__ void empty() {}', "empty")
    sizes = [np.int64(b.nbytes) for b in buffers]
    copy_args = (ring.current, buffers[0], sizes[0], buffers[1], sizes[1], buffers[2], sizes[2])
    rows = {
        "empty kernel": lambda: empty((1,), (32,), ()),
        "fetch_slot (host slot)": lambda: fetch_slot((1,), (32,), (host, ring.state, done, np.int32(ring.slots),
                                                                    ring.current)),
        "fetch_slot (device slot)": lambda: fetch_slot((1,), (32,), (device_words, ring.state,
                                                                      device_words[4 * ring.slots:],
                                                                      np.int32(ring.slots), ring.current)),
        "copy_current (2 MB fp16 x)": lambda: copy_current((512,), (256,), copy_args),
    }
    result = {}
    for name, fn in rows.items():
        if name.startswith("copy"):   # valid sources (the fetches above left ok = 0: a bytewise NaN fill)
            ring.current[:] = cp.asarray([x.data.ptr, h0.data.ptr, c0.data.ptr, 1], cp.int64)
        result[name] = per_node_us(fn)
    for cell in (("bfloat16", 1024, 4), ("float32", 512, 4)):
        for name, us in forward_graph_us(cell).items():
            result[f"{cell} graph: {name}"] = us
    for name, us in result.items():
        print(f"| {name} | {us:.2f} |")
    Path(out).mkdir(parents=True, exist_ok=True)
    Path(out, "probe_fetch_nodes.json").write_text(json.dumps(
        {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "us_per_node": result}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
