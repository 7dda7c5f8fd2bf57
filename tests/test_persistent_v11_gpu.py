"""`persistent` v11 on the GPU: the tensor-core kernels' pointwise threads run units fastest (where a
block has at least 8 units). Only the thread that handles a (unit, batch) pair changes, not the
arithmetic, so forward and every gradient are bitwise those of the v10 order (UNITS_FASTEST=0), and
both match the float64 reference."""
import numpy as np
import pytest

from ecornn import LSTMConfig
from ecornn.engines import persistent
from tests.test_persistent_gpu import HALF_TOL, _compare

pytestmark = pytest.mark.gpu


def _bits(a):
    a = np.asarray(a)
    return a.view(np.uint16 if a.dtype.itemsize == 2 else np.uint32)


@pytest.mark.parametrize("dtype, hidden, layers, bidir, batch, steps", [
    ("float16", 1024, 1, False, 16, 40),    # 8 units per block, grid.sync
    ("bfloat16", 2048, 1, False, 4, 12),    # 16 units (v38: 8 warps under grid.sync; 16 tagged before)
    ("float16", 1000, 2, True, 3, 30),      # two directions in one grid: 16 units, odd batch
    ("bfloat16", 512, 1, False, 8, 20),     # 4 units: the batch-fastest order either way
])
def test_thread_orders_agree_bitwise_and_match_the_reference(monkeypatch, dtype, hidden, layers, bidir, batch,
                                                             steps):
    config = LSTMConfig(hidden, hidden, layers, bidir, dtype, batch, steps)
    seed = hidden + batch
    v11 = _compare(np.random.default_rng(seed), config, HALF_TOL)
    assert persistent.last_kinds == {"forward": "mma", "backward": "mma"}
    monkeypatch.setattr(persistent, "UNITS_FASTEST", False)
    assert persistent.plans_for(config, True)["forward"].defines()["UNITS_FASTEST"] == 0
    v10 = _compare(np.random.default_rng(seed), config, HALF_TOL)
    for a, b in zip(v11, v10):
        assert np.array_equal(_bits(a), _bits(b))
