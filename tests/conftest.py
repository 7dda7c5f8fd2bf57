import numpy as np
import pytest

from ecornn.arrays import gpu_available


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU (CuPy with a device) on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng(request):
    """A fresh, differently seeded generator per test; the seed is printed on failure."""
    seed = np.random.SeedSequence().entropy % (2**32)
    request.node.user_properties.append(("seed", seed))
    print(f"rng seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def _poison_gpu_outputs(request, monkeypatch):
    """GPU tests run the persistent engine with NaN-filled outputs, so unwritten elements fail."""
    if "gpu" not in request.keywords or not gpu_available():
        return
    from ecornn.engines import persistent
    monkeypatch.setattr(persistent, "POISON_OUTPUTS", True)


@pytest.fixture
def unpadded_batches(monkeypatch):
    """The persistent engine at the batch a test names: no v47 batch padding (tests of an earlier version's plans
    and internals at odd batches)."""
    from ecornn.engines import persistent
    monkeypatch.setattr(persistent, "BATCH_PADDING", False)
