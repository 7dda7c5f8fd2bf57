"""The numpy >= 1.24 compatibility layer for mxnet 1.9.1 (ecornn/mxnet_compat.py).

Import order matters to the layer, so the import scenarios run in fresh interpreters."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ecornn import mxnet_compat
from tests.mxnet_helpers import mx  # noqa: F401  (skips the module without mxnet)

pytestmark = pytest.mark.mxnet

NUMPY_2 = int(np.__version__.split(".")[0]) >= 2


def _run_fresh(code: str) -> str:
    """Run ``code`` in a new interpreter of this environment; return its stdout (fail on error)."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_needed_exactly_from_numpy_1_24():
    major, minor = (int(p) for p in np.__version__.split(".")[:2])
    assert mxnet_compat.needed() == ((major, minor) >= (1, 24))


def test_numpy_is_left_alone_where_mxnet_supports_it():
    if mxnet_compat.needed():
        pytest.skip("numpy >= 1.24 here")
    assert [name for name in mxnet_compat.apply() if name.startswith("numpy.")] == []
    assert "PZERO" not in np.__dict__ or np.PZERO == 0.0  # numpy 1.23's own constant


@pytest.mark.skipif(not mxnet_compat.needed(), reason="numpy < 1.24 needs no layer")
def test_added_names_keep_their_numpy_meaning():
    assert mxnet_compat.apply() == []  # applied once already (importing mxnet), idempotent
    assert (np.PZERO, np.NINF, np.PINF, np.Inf) == (0.0, -np.inf, np.inf, np.inf)
    assert np.copysign(1.0, np.NZERO) == -1.0 and np.isnan(np.NAN) and np.isnan(np.NaN)
    a = np.array([[3.0, 1.0], [2.0, 0.0]])
    assert np.sometrue(a == 0) and not np.alltrue(a > 0)
    assert np.product([2, 3]) == 6 and np.round_(1.26, 1) == 1.3
    assert np.in1d([1, 5], [5]).tolist() == [False, True]
    assert np.array_equal(np.msort(a), np.sort(a, axis=0)) and np.trapz([1.0, 1.0]) == 1.0
    # New function objects: mxnet's __array_function__ registry keys on them.
    assert np.sometrue is not np.any and np.product is not np.prod
    with pytest.raises(RuntimeError, match="numpy_financial"):
        np.npv(0.1, [1.0])
    if NUMPY_2:
        assert np.bool is np.bool_  # numpy 2's own, untouched


def test_import_ecornn_then_mxnet_works_and_touches_numpy_only_when_mxnet_imports():
    out = _run_fresh("""
        import numpy as np
        import ecornn
        print("before", "PZERO" in np.__dict__)
        import mxnet as mx
        from mxnet import gluon
        block = gluon.rnn.LSTM(3)
        block.initialize()
        print("shape", block(mx.nd.ones((2, 1, 4))).shape)
    """)
    touched = "before True" in out
    assert not touched or not mxnet_compat.needed()
    assert "shape (2, 1, 3)" in out


def test_mxnet_imported_first_then_ecornn_gluon():
    out = _run_fresh("""
        try:
            import mxnet
            print("mxnet first: ok")
        except Exception as exc:
            print("mxnet first:", type(exc).__name__)
        import ecornn
        block = ecornn.LSTM(3)
        block.initialize()
        import mxnet as mx
        print("shape", block(mx.nd.ones((2, 1, 4))).shape)
    """)
    assert ("mxnet first: ok" in out) != mxnet_compat.needed()
    assert "shape (2, 1, 3)" in out


def test_mxnet_imported_first_then_ecornn_then_mxnet_again():
    out = _run_fresh("""
        try:
            import mxnet
        except Exception:
            pass
        import ecornn
        import mxnet as mx
        from mxnet import gluon
        print("util", mx.util.is_np_array())
        block = gluon.rnn.LSTM(3)
        block.initialize()
        print("shape", block(mx.nd.ones((2, 1, 4))).shape)
    """)
    assert "util False" in out and "shape (2, 1, 3)" in out


def test_python_without_distutils_gets_a_minimal_one():
    # Python >= 3.12 has no distutils; simulate that here.
    out = _run_fresh("""
        import sys
        sys.modules["distutils"] = None
        from ecornn import mxnet_compat
        mx = mxnet_compat.import_mxnet()
        print("shim", type(sys.modules["distutils.version"].LooseVersion("1.0")).__module__)
        print("version", mx.__version__)
    """)
    assert "shim ecornn.mxnet_compat" in out and "version 1.9.1" in out


@pytest.mark.parametrize("left, right, less", [
    ("1.23.5", "1.24", True), ("2.4.6", "1.17", False), ("1.6.0", "1.6.0", False),
    ("1.17", "1.17.0", False), ("2.0.0rc1", "2.0.0", True), ("1.10", "1.9", False),
])
def test_version_shim_orders_versions(left, right, less):
    version = mxnet_compat._Version
    assert (version(left) < version(right)) == less
    assert (version(left) >= right) == (not less)


def test_import_order_error_tells_what_to_do():
    message = str(mxnet_compat._import_order_error(AttributeError("np.PZERO was removed")))
    assert "import ecornn (or ecornn.mxnet_compat) before mxnet" in message
    assert "np.PZERO was removed" in message
