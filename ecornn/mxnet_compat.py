"""Let mxnet 1.9.1 (the last release) import and run Gluon on numpy >= 1.24 and Python >= 3.12.

mxnet 1.9.1 reads numpy names that numpy has since removed, most of them at import time, so
``import mxnet`` fails on numpy >= 1.24. This layer puts back exactly those names, and only the
ones the running numpy lacks; it never replaces an attribute numpy still has. It is applied only
when numpy >= 1.24 (on numpy 1.23, mxnet's own range, nothing is touched) and must run before
mxnet is imported: ``import ecornn`` installs an import hook that applies it when mxnet is first
imported, and ``import_mxnet()`` applies it and returns the module. If ``import mxnet`` already
failed before ecornn was imported, the next import (through the hook or ``import_mxnet``) runs
again with the layer in place, re-linking the submodules the failed attempt left behind; if it
still fails, ``import_mxnet`` raises ImportError saying to import ecornn before mxnet.

What it adds to the ``numpy`` module, and why:

- ``PZERO, NZERO, PINF, NINF, NAN, NaN`` (removed in numpy 2.0): ``mxnet/numpy/utils.py``
  copies them into ``mxnet.numpy`` at import. Values: 0.0, -0.0, inf, -inf, nan, nan.
- ``Inf`` (removed in 2.0): default argument in ``mxnet.gluon.contrib.estimator``.
- ``bool`` (removed in 1.24, back in 2.0 as ``numpy.bool_``): ``mxnet/numpy/utils.py`` again;
  set to ``numpy.bool_``, what numpy 2 calls ``numpy.bool``.
- ``alltrue, in1d, msort, trapz`` (removed in 2.0 / 2.4): re-exported by
  ``mxnet/numpy/fallback.py`` at import. Thin wrappers over ``all``, ``isin``, ``sort(axis=0)``,
  ``trapezoid``.
- ``sometrue, product, round_`` (removed in 2.0): ``mxnet/numpy_dispatch_protocol.py`` registers
  mxnet's ``__array_function__`` overrides keyed by these numpy functions at import. Wrappers over
  ``any``, ``prod``, ``round``; each is a new function object, so mxnet's registry does not
  overwrite its entries for ``any``/``prod``/``round``.
- ``mirr, npv, pmt, ppmt, pv, rate`` (financial functions, removed in 1.20; numpy 1.x kept stubs
  that raise): ``mxnet/numpy/fallback.py`` re-exports them. Same stubs: calling one raises.

And on Python >= 3.12 (no ``distutils``) when setuptools does not provide one: a minimal
``distutils.version`` with ``LooseVersion``/``StrictVersion``, which mxnet uses to compare numpy
versions at import.

Not patched (outside what Gluon needs): ``numpy.compat`` (``mx.np.pad`` with a string mode),
``numpy.int`` (``mx.test_utils.chi_square_check``).
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import re
import sys
import types

import numpy as np

_FINANCIAL = ("mirr", "npv", "pmt", "ppmt", "pv", "rate")
_HOOK = None  # the installed _MxnetImportHook, if any


def needed() -> bool:
    """True when the running numpy is outside mxnet 1.9.1's range (numpy >= 1.24)."""
    major, minor = (int(p) for p in re.match(r"(\d+)\.(\d+)", np.__version__).groups())
    return (major, minor) >= (1, 24)


def _wrapper(name, target):
    @functools.wraps(target)
    def alias(*args, **kwargs):
        return target(*args, **kwargs)
    alias.__name__ = alias.__qualname__ = name
    alias.__doc__ = f"Added by ecornn.mxnet_compat for mxnet 1.9.1: numpy.{target.__name__}."
    return alias


def _removed(name):
    def stub(*args, **kwargs):
        raise RuntimeError(f"numpy.{name} was removed from NumPy (use the numpy_financial package)")
    stub.__name__ = stub.__qualname__ = name
    return stub


def _sort_first_axis(a):
    return np.sort(a, axis=0)


_CONSTANTS = {"PZERO": 0.0, "NZERO": -0.0, "PINF": float("inf"), "NINF": float("-inf"),
              "NAN": float("nan"), "NaN": float("nan"), "Inf": float("inf")}
_ALIASES = {"alltrue": "all", "in1d": "isin", "trapz": "trapezoid", "sometrue": "any",
            "product": "prod", "round_": "round"}


def _replacement(name):
    """The value the layer gives numpy.<name>."""
    if name in _CONSTANTS:
        return _CONSTANTS[name]
    if name == "bool":
        return np.bool_
    if name == "msort":
        return _wrapper("msort", _sort_first_axis)
    if name in _ALIASES:
        return _wrapper(name, getattr(np, _ALIASES[name]))
    return _removed(name)


PATCHED_NAMES = tuple(_CONSTANTS) + ("bool", "msort") + tuple(_ALIASES) + _FINANCIAL


def _has(name) -> bool:
    # numpy >= 1.24 answers removed names through a module __getattr__ that raises.
    try:
        getattr(np, name)
    except (AttributeError, RuntimeError):
        return False
    return True


def apply() -> list:
    """Add what mxnet 1.9.1 needs to numpy (only names numpy lacks, only on numpy >= 1.24)
    and provide distutils where Python has none. Returns the names added; idempotent."""
    added = []
    if needed():
        for name in PATCHED_NAMES:
            if name not in np.__dict__ and not _has(name):
                setattr(np, name, _replacement(name))
                added.append(f"numpy.{name}")
    if _provide_distutils():
        added.append("distutils.version")
    return added


def _provide_distutils() -> bool:
    if sys.modules.get("distutils") is not None or importlib.util.find_spec("distutils") is not None:
        return False  # Python < 3.12, setuptools' distutils, or this shim already
    version = types.ModuleType("distutils.version")
    version.LooseVersion = version.StrictVersion = _Version
    package = types.ModuleType("distutils")
    package.__path__ = []
    package.version = version
    sys.modules["distutils"], sys.modules["distutils.version"] = package, version
    return True


@functools.total_ordering
class _Version:
    """Enough of distutils' LooseVersion/StrictVersion for mxnet's "numpy >= 1.17" checks:
    release numbers compare numerically (trailing zeros ignored), a pre-release suffix
    ("rc1", "dev0") sorts before its release."""

    def __init__(self, text):
        self.vstring = str(text)
        release, suffix = re.match(r"(\d+(?:\.\d+)*)(.*)", self.vstring).groups()
        numbers = [int(p) for p in release.split(".")]
        while len(numbers) > 1 and numbers[-1] == 0:
            numbers.pop()
        self.key = (numbers, 0 if suffix else 1, suffix)

    @staticmethod
    def _of(other):
        return other if isinstance(other, _Version) else _Version(other)

    def __eq__(self, other):
        return self.key == self._of(other).key

    def __lt__(self, other):
        return self.key < self._of(other).key

    def __repr__(self):
        return f"LooseVersion({self.vstring!r})"


class _MxnetImportHook(importlib.abc.MetaPathFinder):
    """Applies the layer the moment ``mxnet`` is first imported, then steps aside."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "mxnet":
            return None
        apply()
        remove_import_hook()
        if not any(name.startswith("mxnet.") for name in sys.modules):
            return None  # the normal finders import mxnet
        spec = importlib.util.find_spec("mxnet")  # after a failed import: repair once loaded
        if spec is not None and spec.loader is not None:
            spec.loader = _RelinkingLoader(spec.loader)
        return spec


class _RelinkingLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        _link_submodules("mxnet")


def install_import_hook() -> None:
    """Called by ``import ecornn``: patch numpy only if and when mxnet is imported."""
    global _HOOK
    if _HOOK is None and "mxnet" not in sys.modules:
        _HOOK = _MxnetImportHook()
        sys.meta_path.insert(0, _HOOK)


def remove_import_hook() -> None:
    global _HOOK
    if _HOOK is not None and _HOOK in sys.meta_path:
        sys.meta_path.remove(_HOOK)
    _HOOK = None


def import_mxnet():
    """Import mxnet 1.9.1 with the layer applied; return the module.

    If mxnet was already imported, the layer is still applied (names mxnet reads at call time
    then work). If an earlier ``import mxnet`` failed before ecornn was imported, mxnet is
    imported again with the layer in place (reusing the submodules the failed import left); if
    that fails too, the ImportError says what to do.
    """
    apply()
    remove_import_hook()
    if "mxnet" in sys.modules:
        return sys.modules["mxnet"]
    partial = any(name.startswith("mxnet.") for name in sys.modules)
    try:
        import mxnet
    except ImportError as exc:
        if "No module named 'mxnet'" in str(exc):
            raise ImportError("ecornn.LSTM needs mxnet 1.9.1: pip install 'ecornn[mxnet]' "
                              "(on numpy >= 1.24: pip install --no-deps mxnet==1.9.1)") from exc
        raise _import_order_error(exc) if partial else exc
    except Exception as exc:  # mxnet raises AttributeError/RuntimeError on a numpy it cannot use
        raise _import_order_error(exc) if partial else exc
    if partial:
        _link_submodules("mxnet")
    return mxnet


def _link_submodules(package):
    """Submodules that a failed import left in sys.modules are not re-executed, so the fresh
    package modules lack them as attributes (``mxnet.util``, ...): put them back."""
    for name, module in list(sys.modules.items()):
        parent, _, child = name.rpartition(".")
        if module is not None and parent.startswith(package) and parent in sys.modules:
            if not hasattr(sys.modules[parent], child):
                setattr(sys.modules[parent], child, module)


def _import_order_error(exc) -> ImportError:
    return ImportError(f"mxnet failed to import earlier on numpy {np.__version__} "
                       f"({type(exc).__name__}: {exc}); import ecornn (or ecornn.mxnet_compat) "
                       "before mxnet, in a fresh process")
