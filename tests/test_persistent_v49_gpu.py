"""`persistent` v49 on the GPU: the replay ring's publish on CuPy's own contiguity flag and plain word stores. Each
replay of issue 5's cells is compared bitwise with the eager path on its own inputs (a wrong or stale address shows
as another call's result), with a strided and a misaligned input among them, and the last with float64."""
import pytest

from ecornn import LSTMConfig
from ecornn.arrays import c_contiguous
from ecornn.engines import persistent
from tests.test_persistent_v5_gpu import _gpu_inputs
from tests.test_persistent_v17_gpu import _prepared
from tests.test_persistent_v20_gpu import _entry, assert_replays_fetched_their_own, shifted_copy

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("view", [lambda a: a, lambda a: a.T, lambda a: a[:, ::2], lambda a: a[1:], lambda a: a[:, 1:],
                                  lambda a: a.reshape(-1)[3:], lambda a: a[None], lambda a: a[:0]])
def test_c_contiguous_of_cupy_views_is_their_flag(view):
    import cupy as cp
    a = view(cp.zeros((6, 8), cp.float32))
    assert c_contiguous(a) is a.flags.c_contiguous


@pytest.mark.parametrize("dtype, hidden, batch, steps", [
    ("float32", 1024, 4, 40), ("float32", 1024, 8, 40), ("float16", 1024, 16, 20), ("bfloat16", 100, 3, 9)])
def test_replays_of_new_strided_and_misaligned_inputs_fetch_their_own(rng, monkeypatch, dtype, hidden, batch, steps):
    import cupy as cp
    config = LSTMConfig(hidden, hidden, 1, False, dtype, batch, steps)
    host_weights, gpu_weights, prepared = _prepared(rng, config)
    calls = [_gpu_inputs(rng, config) for _ in range(6)]
    x, h0, c0 = calls[2]
    wide = cp.zeros((*x.shape[:2], x.shape[2] + 3), x.dtype)
    wide[..., :x.shape[2]] = x
    calls[2] = (wide[..., :x.shape[2]], h0, c0)                     # strided: converted to a copy first
    x, h0, c0 = calls[3]
    calls[3] = (shifted_copy(x), shifted_copy(h0), c0)               # off 16-byte alignment
    assert not calls[2][0].flags.c_contiguous and calls[3][1].data.ptr % 16
    outs = [persistent.forward(config, x, gpu_weights, h0, c0, prepared=prepared)[:3] for x, h0, c0 in calls]
    cp.cuda.Device().synchronize()   # the fetches report their count to the host as they run
    assert _entry(prepared).ring.last_sources[2] == calls[-1][2].data.ptr
    assert_replays_fetched_their_own(monkeypatch, config, host_weights, gpu_weights, prepared, calls, outs)
