"""v60: a count of assignments to the engines' flag modules, and a tuple that hashes once.

A replayed inference forward finds its CUDA graph by a key that holds every flag the capture depended on
(persistent._graph_mode: ~60 module globals of persistent, persistent_rules, gpu_blas and batch_pad). Building that
tuple and hashing it on every call cost ~2.5 µs of host time after a device sync, before the launch, where the GPU
waits. The flag modules hand their class to ``count_assignments``, so every later assignment to one of their
attributes from outside (tests, benchmarks, callers: ``setattr``) counts here, and the mode is rebuilt only after one.
"""
from __future__ import annotations

import sys
import types

assignments = 0   # assignments to the counted modules' attributes so far


class _CountedModule(types.ModuleType):
    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        _count()   # after the assignment: a reader that sees the new count sees the new value

    def __delattr__(self, name):
        super().__delattr__(name)
        _count()


def _count() -> None:
    global assignments
    assignments += 1


def count_assignments(module_name: str) -> None:
    """Count every later assignment to the attributes of module ``module_name``. A module's own ``global``
    statements write its dictionary directly and are not counted; the flag modules assign no flag that way."""
    sys.modules[module_name].__class__ = _CountedModule


class HashedTuple(tuple):
    """A tuple that hashes its items once (a graph key holds the ~60 flags of the mode, looked up per replay)."""

    def __new__(cls, items=()):
        made = super().__new__(cls, items)
        made._hash = tuple.__hash__(made)
        return made

    def __hash__(self):
        return self._hash
