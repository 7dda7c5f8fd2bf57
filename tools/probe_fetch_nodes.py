"""Probe (v20, v21): GPU µs per graph node of the replay ring's fetch_slot (one warp reading a slot of
mapped host memory), copy_current (the input copy from device memory) and an empty kernel, each
captured N times in a row into one graph and replayed back to back. Then the bf16 H=1024 B=4 forward
graph (T=256; the tensor-core kernel reads x itself) captured with its input nodes varied and
replayed back to back: v20 (fetch_slot, copy_current of x, h0, c0), v21 (x read by the kernel at its
fetched address, only h0 and c0 copied), fetch_slot alone (v20's kernel, or v21's with h0 and c0
stale), no input node (timing only: stale inputs); then v20 and v21 with x rewritten in place by a
device copy before each launch (fresh x, as a caller's embedding or earlier layer would leave it),
that copy alone, and v21 with another buffer of x's size rewritten instead (is it x's freshness or
any write before the kernel?). Prints a table; writes OUT_DIR/probe_fetch_nodes.json.

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
    """GPU µs per replay of the cell's forward graph under each variant (name -> (input nodes, v21's
    KERNEL_READS_X, a buffer rewritten by a device copy before each launch: x or another)). The rewrite tells a
    cost of the copy node from a cost of the kernel reading freshly written x (v21's question)."""
    from bench_persistent import _problem
    from ecornn.engines import persistent, persistent_graph
    config, weights, x, h0, c0 = _problem(*cell)
    prepared = persistent.prepare(config, weights)
    persistent_graph._copy_kernel(cp.cuda.runtime.getDevice())   # compiled before any capture
    real = ring_module.InputRing.capture_fetch
    variants = {"v20": (real, False, False), "v21": (real, True, False), "fetch only": ("fetch", False, False),
                "v21, fetch only (h0, c0 stale)": ("fetch", True, False), "no input node": (None, False, False),
                "v20, x rewritten": (real, False, "x"), "v21, x rewritten": (real, True, "x"),
                "v21, another buffer rewritten": (real, True, "other")}
    source, other = x.copy(), x.copy()

    def rewrite(target):   # the caller producing a new x in place, as an embedding or a layer before would
        cp.cuda.runtime.memcpyAsync(target.data.ptr, source.data.ptr, x.nbytes, cp.cuda.runtime.memcpyDeviceToDevice,
                                    cp.cuda.get_current_stream().ptr)
    out = {"x rewrite alone": _gpu_us(lambda: rewrite(x), repeats)}
    for name, (nodes, reads_x, rewritten) in variants.items():
        prepared.graphs.clear()
        persistent_graph.KERNEL_READS_X = reads_x
        ring_module.InputRing.capture_fetch = _input_nodes(nodes, real)
        try:
            for _ in range(2):
                persistent.forward(config, x, weights, h0, c0, prepared=prepared)
        finally:
            ring_module.InputRing.capture_fetch = real
            persistent_graph.KERNEL_READS_X = True
        (entry,) = prepared.graphs.values()
        out[f"{name}: x by reference"] = bool(entry.ring is not None and entry.ring.by_reference[0])
        stream = cp.cuda.get_current_stream()
        bare = (lambda: entry.launch_bare(stream)) if nodes is real else (lambda: entry.graph.launch(stream=stream))
        target = {"x": x, "other": other}.get(rewritten)
        launch = (lambda: (rewrite(target), bare())) if target is not None else bare
        out[name] = _gpu_us(launch, repeats)
    prepared.graphs.clear()
    return out


def _input_nodes(variant, real):
    """capture_fetch replaced by the variant's nodes (None: no input node; "fetch": fetch_slot alone)."""
    def capture(ring):
        device = cp.cuda.runtime.getDevice()
        if variant == "fetch":
            fetch_slot, _ = ring_module._fetch_kernels_for(device)
            fetch_slot((1,), (32,), (np.uint64(ring.host.device_ptr), ring.state,
                                     np.uint64(ring.host.device_ptr + 8 * 4 * ring.slots), np.int32(ring.slots),
                                     ring.current))
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
    copy_args = (ring.current, np.int32(0), buffers[0], sizes[0], buffers[1], sizes[1], buffers[2], sizes[2])
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
    for cell in (("bfloat16", 1024, 4),):
        for name, us in forward_graph_us(cell).items():
            result[f"{cell} graph: {name}"] = us
    for name, us in result.items():
        print(f"| {name} | {us:.2f} |" if not isinstance(us, bool) else f"| {name} | {us} |")
    Path(out).mkdir(parents=True, exist_ok=True)
    Path(out, "probe_fetch_nodes.json").write_text(json.dumps(
        {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "us_per_node": result}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
