"""torch.nn.LSTM (cuDNN) timed in the same process, for every ratio ecornn reports. Optional."""
from __future__ import annotations

from .config import LSTMConfig


def torch_available() -> bool:
    try:
        import torch
    except Exception:
        return False
    return torch.cuda.is_available()


def time_torch_lstm(config: LSTMConfig, training: bool, iterations: int = 20, tf32: bool = True,
                    cudnn: bool = True, seed: int = 0) -> float:
    """Median µs per timestep of torch.nn.LSTM on random data (CUDA events)."""
    import torch
    dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
             "float64": torch.float64}[config.dtype]
    torch.manual_seed(seed)
    lstm = torch.nn.LSTM(config.input_size, config.hidden_size, config.num_layers,
                         bidirectional=config.bidirectional).cuda().to(dtype)
    x = torch.randn(config.seq_len, config.batch, config.input_size, device="cuda", dtype=dtype,
                    requires_grad=training)
    dy = torch.randn(config.seq_len, config.batch, config.num_directions * config.hidden_size,
                     device="cuda", dtype=dtype)
    old_matmul = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        # flags() sets cuDNN's allow_tf32 itself (default True), so pass ours through it
        with torch.backends.cudnn.flags(enabled=cudnn, allow_tf32=tf32):
            def once():
                y, _ = lstm(x)
                if training:
                    y.backward(dy)
            with torch.enable_grad() if training else torch.no_grad():
                return median_cuda_us(once, iterations) / config.seq_len
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_matmul


def median_cuda_us(fn, iterations: int, warmup: int = 3) -> float:
    """Median µs of ``fn()`` on torch's current CUDA stream (events), after ``warmup`` calls."""
    import torch
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    times.sort()
    return times[len(times) // 2]
