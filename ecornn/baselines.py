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
    old = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        with torch.backends.cudnn.flags(enabled=cudnn):
            def once():
                y, _ = lstm(x)
                if training:
                    y.backward(dy)
            grad = torch.enable_grad() if training else torch.no_grad()
            with grad:
                for _ in range(3):
                    once()
                times = []
                for _ in range(iterations):
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    once()
                    stop.record()
                    stop.synchronize()
                    times.append(start.elapsed_time(stop) * 1e3)
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old
    times.sort()
    return times[len(times) // 2] / config.seq_len
