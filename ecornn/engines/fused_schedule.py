"""The work of one `fused` forward or backward, issued onto a plan's streams.

Called twice per plan and mode: once eagerly (the first call's results, and cuBLAS warm-up) and
once under CUDA stream capture (the graph later calls replay). Only plan-owned buffers and the
FusedWeights' arrays are touched, so a captured graph stays valid while those live.

Row-major LSTM shapes map onto column-major cuBLAS as: activations A[rows, k] (row stride ld) are
the matrix A^T (k x rows, leading dimension ld); a weight W[4H, k] is W^T (k x 4H).
"""
from __future__ import annotations

import numpy as np

from ..gpu_blas import OP_N, OP_T, gemm
from ..weights import slot
from .fused_sizes import cell_slots, chunk_bounds, initial_cell_slot, processing_order


def _i32(v):
    return np.int32(v)


def _ptr(v):
    return np.uint64(v)


class _Streams:
    """Which stream runs what, per the options; side streams fork from and join the main one."""

    def __init__(self, plan):
        self.plan, self.main, self.joined = plan, plan.main, []
        self.fork = plan.event("fork")
        self.main.record(self.fork)

    def _get(self, key):
        if key is None:
            return self.main
        stream = self.plan.stream(key)
        if stream not in self.joined:
            stream.wait_event(self.fork)
            self.joined.append(stream)
        return stream

    def recurrence(self, layer, d):
        return self._get(("rec", layer, d) if self.plan.options.wavefront else None)

    def side(self, layer, d):
        """Input projections (forward) and weight gradients (backward) of one layer."""
        if self.plan.options.second_stream:
            return self._get(("side", layer))
        return self.recurrence(layer, d)

    def join(self):
        for i, stream in enumerate(self.joined):
            self.main.wait_event(stream.record(self.plan.event(("join", i))))


def _layer_input(plan, layer):
    """(buffer name, width) of the input of ``layer``."""
    cfg = plan.config
    if layer == 0:
        return "x", cfg.input_size
    return (f"drop{layer - 1}" if plan.dropout else f"y{layer - 1}"), cfg.num_directions * cfg.hidden_size


def launch_rows(kernel, stream, rows, cols, args):
    """Launch on ``stream`` a kernel whose grid is (ceil(cols/128), rows); kernels stride over
    rows past 65535."""
    with stream:
        kernel(((cols + 127) // 128, min(rows, 65535)), (128,), args)


def _launch_flat(kernel, stream, n, args):
    with stream:
        kernel((min((n + 255) // 256, 4096),), (256,), args)


def _gemm(plan, stream, *args, beta=0.0):
    gemm(*args, beta=beta, a_type=plan.config.dtype, c_type="float32", tf32=plan.options.tf32,
         stream=stream)


# ---- forward --------------------------------------------------------------------------------

def issue_forward(plan, fw) -> None:
    cfg, opts = plan.config, plan.options
    dirs = cfg.num_directions
    streams = _Streams(plan)
    chunks = chunk_bounds(cfg.seq_len, opts.chunk if opts.second_stream else cfg.seq_len)
    n = len(chunks)
    for layer in range(cfg.num_layers):
        src, width = _layer_input(plan, layer)
        masked = set()
        for p in range(n):
            for d in range(dirs):
                k = p if d == 0 else n - 1 - p  # each direction's chunks in its processing order
                stream = streams.side(layer, d)
                if layer > 0:
                    for d_below in range(dirs):
                        stream.wait_event(plan.event(("rec", layer - 1, d_below, k)))
                    if plan.dropout:
                        _mask_chunk(plan, stream, layer, k, chunks[k], masked)
                _project(plan, stream, fw, layer, d, src, width, chunks[k])
                stream.record(plan.event(("proj", layer, d, k)))
        for d in range(dirs):
            _recur(plan, streams.recurrence(layer, d), fw, layer, d, chunks)
    streams.join()


def _mask_chunk(plan, stream, layer, k, chunk, masked):
    """Dropout on chunk k of the layer below's output, once for both directions."""
    if k in masked:
        stream.wait_event(plan.event(("mask", layer, k)))
        return
    cfg = plan.config
    width = cfg.num_directions * cfg.hidden_size
    start, count = chunk[0] * cfg.batch * width, (chunk[1] - chunk[0]) * cfg.batch * width
    below = layer - 1
    _launch_flat(plan.kernels.mask_storage, stream, count,
                 (_ptr(plan.ptr(f"y{below}", start)), _ptr(plan.ptr(f"mask{below}", start)),
                  _ptr(plan.ptr(f"drop{below}", start)), np.int64(count)))
    stream.record(plan.event(("mask", layer, k)))
    masked.add(k)


def _project(plan, stream, fw, layer, d, src, width, chunk):
    """z[t0:t1] = x[t0:t1] W_ih^T for one chunk: one GEMM over (t1-t0)*B rows."""
    cfg = plan.config
    gates, b = 4 * cfg.hidden_size, cfg.batch
    w_ih = fw.slots[slot(layer, d, cfg.num_directions)][0]
    rows = (chunk[1] - chunk[0]) * b
    _gemm(plan, stream, OP_T, OP_N, gates, rows, width, w_ih, width,
          plan.ptr(src, chunk[0] * b * width), width, plan.ptr(f"z{layer}_{d}", chunk[0] * b * gates), gates)


def _recur(plan, stream, fw, layer, d, chunks):
    cfg = plan.config
    steps, b, h = cfg.seq_len, cfg.batch, cfg.hidden_size
    reverse, s = d == 1, slot(layer, d, cfg.num_directions)
    init = initial_cell_slot(steps, reverse, plan.training)
    launch_rows(plan.kernels.storage_to_f32, stream, b, h,
                 (_ptr(plan.ptr("c0", s * b * h)), _i32(h), _ptr(plan.ptr(f"c{layer}_{d}", init * b * h)),
                  _i32(h), _i32(b), _i32(h)))
    position = 0
    for k in (reversed(range(len(chunks))) if reverse else range(len(chunks))):
        stream.wait_event(plan.event(("proj", layer, d, k)))
        t0, t1 = chunks[k]
        for t in (range(t1 - 1, t0 - 1, -1) if reverse else range(t0, t1)):
            _step(plan, stream, fw, layer, d, t, position)
            position += 1
        stream.record(plan.event(("rec", layer, d, k)))


def _launch_mma(plan, kernel_name, tile, stream, args):
    """One fused_step_mma.cu launch: grid (column blocks, batch tiles), per-warp partials in
    dynamic shared memory."""
    kernel = getattr(plan.mma[tile], kernel_name)
    with stream:
        kernel(tile.grid(plan.config.batch, plan.config.hidden_size), (tile.threads,), args,
               shared_mem=tile.smem_bytes())


def _step(plan, stream, fw, layer, d, t, position):
    """One timestep: z_t += W_hh h_prev (GEMM), then the fused pointwise kernel; or both in one
    tensor-core kernel (plan.mma_fwd, 16-bit)."""
    cfg = plan.config
    steps, b, h, dirs = cfg.seq_len, cfg.batch, cfg.hidden_size, cfg.num_directions
    reverse, s, width = d == 1, slot(layer, d, dirs), dirs * h
    _, w_hh, bias = fw.slots[s]
    if position == 0:
        h_prev, ld = plan.ptr("h0", s * b * h), h
    else:
        t_prev = t + 1 if reverse else t - 1
        h_prev, ld = plan.ptr(f"y{layer}", t_prev * b * width + d * h), width
    z = plan.ptr(f"z{layer}_{d}", t * b * 4 * h)
    prev, cur = cell_slots(position, t, steps, reverse, plan.training)
    last = position == steps - 1
    cells = f"c{layer}_{d}"
    tail = (_ptr(plan.ptr(cells, prev * b * h)), _ptr(plan.ptr(cells, cur * b * h)),
            _ptr(plan.ptr(f"y{layer}", t * b * width + d * h)), _i32(width),
            _ptr(plan.ptr("hT", s * b * h) if last else 0), _ptr(plan.ptr("cT", s * b * h) if last else 0),
            _i32(int(plan.training)), _i32(b), _i32(h))
    if plan.mma_fwd is not None:
        # 8-byte activation loads need whole k-steps and 8-byte aligned rows: h % 16 == 0 gives
        # both (row strides h or 2h, offsets multiples of h); else the kernel's 16-bit path
        aligned = int(h % 16 == 0)
        packed = fw.packed[(s, plan.mma_fwd.pack_key)]
        _launch_mma(plan, "fused_step_fwd", plan.mma_fwd, stream,
                    (packed, _ptr(h_prev), _i32(ld), _i32(aligned), _ptr(z), bias) + tail)
        return
    _gemm(plan, stream, OP_T, OP_N, 4 * h, b, h, w_hh, h, h_prev, ld, z, 4 * h, beta=1.0)
    launch_rows(plan.kernels.lstm_forward_step, stream, b, h, (_ptr(z), bias) + tail)


# ---- backward -------------------------------------------------------------------------------

def issue_backward(plan, fw) -> None:
    """g_a holds dL/dy (fp32), dh_rec/dc hold dL/dh_T, dL/dc_T: set by the caller before."""
    cfg = plan.config
    dirs = cfg.num_directions
    streams = _Streams(plan)
    g_out, g_in = "g_a", "g_b"
    for layer in reversed(range(cfg.num_layers)):
        src, width = _layer_input(plan, layer)
        for d in range(dirs):
            stream = streams.recurrence(layer, d)
            if layer < cfg.num_layers - 1:
                stream.wait_event(plan.event(("g_in", layer + 1)))
            _recur_backward(plan, stream, fw, layer, d, g_out)
            done = plan.event(("bdone", layer, d))
            stream.record(done)
            side = streams.side(layer, d)
            side.wait_event(done)
            _weight_grads(plan, side, layer, d, src, width)
        for d in range(dirs):
            streams.main.wait_event(plan.event(("bdone", layer, d)))
        _input_grad(plan, streams.main, fw, layer, g_in, width)
        streams.main.record(plan.event(("g_in", layer)))
        g_out, g_in = g_in, g_out
    streams.join()


def _recur_backward(plan, stream, fw, layer, d, g_out):
    cfg = plan.config
    steps, b, h, dirs = cfg.seq_len, cfg.batch, cfg.hidden_size, cfg.num_directions
    reverse, s, width = d == 1, slot(layer, d, dirs), dirs * h
    w_hh = fw.slots[s][1]
    order = processing_order(steps, reverse)
    dh, dc = plan.ptr("dh_rec", s * b * h), plan.ptr("dc", s * b * h)
    cells, z, dz = f"c{layer}_{d}", f"z{layer}_{d}", f"dz{layer}_{d}"
    mma = plan.mma_bwd
    for position in reversed(range(steps)):
        t = order[position]
        prev, cur = cell_slots(position, t, steps, reverse, True)
        dz_t = plan.ptr(dz, t * b * 4 * h)
        inputs = (_ptr(plan.ptr(z, t * b * 4 * h)), _ptr(plan.ptr(cells, cur * b * h)),
                  _ptr(plan.ptr(cells, prev * b * h)), _ptr(plan.ptr(g_out, t * b * width + d * h)),
                  _i32(width))
        if mma is not None and position < steps - 1:
            # dh = dz_{next} W_hh inside the kernel: dz of the step processed just before, written
            # entirely by the previous launch (the kernel boundary is the grid-wide barrier)
            dz_next = plan.ptr(dz, order[position + 1] * b * 4 * h)
            aligned = int(h % 4 == 0)  # K = 4H in whole k-steps, rows of 4H 16-bit words
            _launch_mma(plan, "fused_step_bwd", mma, stream,
                        (fw.packed[(s, mma.pack_key)], _ptr(dz_next), _i32(aligned)) + inputs
                        + (_ptr(dc), _ptr(dz_t), _i32(b), _i32(h)))
        else:  # dh_rec holds dL/dh_T (first position) or dz_{next} W_hh from the GEMM below
            launch_rows(plan.kernels.lstm_backward_step, stream, b, h,
                        inputs + (_ptr(dh), _ptr(dc), _ptr(dz_t), _i32(b), _i32(h)))
        if mma is None or position == 0:
            _gemm(plan, stream, OP_N, OP_N, h, b, 4 * h, w_hh, h, dz_t, 4 * h, dh, h)  # dh = dz W_hh
    for src, dst in ((dh, "dh0"), (dc, "dc0")):
        launch_rows(plan.kernels.f32_to_storage, stream, b, h,
                     (_ptr(src), _i32(h), _ptr(plan.ptr(dst, s * b * h)), _i32(h), _i32(b), _i32(h)))


def _weight_grads(plan, stream, layer, d, src, width):
    """dW_ih = dz^T X, dW_hh = dz^T H_prev, db = dz^T 1: GEMMs over all T*B rows."""
    cfg = plan.config
    steps, b, h, dirs = cfg.seq_len, cfg.batch, cfg.hidden_size, cfg.num_directions
    reverse, s, g = d == 1, slot(layer, d, dirs), 4 * cfg.hidden_size
    rows, name = steps * b, f"{layer}_{d}"
    dz, dw_hh = f"dz{name}", plan.ptr(f"dw_hh{name}")
    _gemm(plan, stream, OP_N, OP_T, width, g, rows, plan.ptr(src), width, plan.ptr(dz), g,
          plan.ptr(f"dw_ih{name}"), width)
    first = steps - 1 if reverse else 0  # the step whose h_prev is h0
    _gemm(plan, stream, OP_N, OP_T, h, g, b, plan.ptr("h0", s * b * h), h,
          plan.ptr(dz, first * b * g), g, dw_hh, h)
    if steps > 1:
        y_width = dirs * h
        h_prev = plan.ptr(f"y{layer}", (b * y_width if reverse else 0) + d * h)
        dz_rows = plan.ptr(dz, 0 if reverse else b * g)
        _gemm(plan, stream, OP_N, OP_T, h, g, (steps - 1) * b, h_prev, y_width, dz_rows, g, dw_hh, h,
              beta=1.0)
    _gemm(plan, stream, OP_N, OP_N, g, 1, rows, plan.ptr(dz), g, plan.ptr("ones"), rows,
          plan.ptr(f"db{name}"), g)


def _input_grad(plan, stream, fw, layer, g_in, width):
    """dL/d(layer input) = sum over directions of dz W_ih (then dropout mask, or dx)."""
    cfg = plan.config
    rows, g = cfg.seq_len * cfg.batch, 4 * cfg.hidden_size
    for d in range(cfg.num_directions):
        w_ih = fw.slots[slot(layer, d, cfg.num_directions)][0]
        _gemm(plan, stream, OP_N, OP_N, width, rows, g, w_ih, width, plan.ptr(f"dz{layer}_{d}"), g,
              plan.ptr(g_in), width, beta=0.0 if d == 0 else 1.0)
    if layer > 0 and plan.dropout:
        n = rows * width
        _launch_flat(plan.kernels.mask_f32, stream, n,
                     (_ptr(plan.ptr(g_in)), _ptr(plan.ptr(f"mask{layer - 1}")), np.int64(n)))
    if layer == 0:
        launch_rows(plan.kernels.f32_to_storage, stream, rows, width,
                     (_ptr(plan.ptr(g_in)), _i32(width), _ptr(plan.ptr("dx")), _i32(width),
                      _i32(rows), _i32(width)))
