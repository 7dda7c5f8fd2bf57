"""Which strategy runs a call, and why.

This is the first planner: an explicit strategy is honoured (or raises NotSupported); "auto" tries
the GPU strategies in order of preference and falls back to the reference. The cost-model planner
replaces ``_preference`` without changing ``plan``'s contract.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .config import LSTMConfig
from .engines import STRATEGIES, get_engine
from .errors import ConfigError, NotSupported


@dataclass
class Plan:
    strategy: str
    reason: str
    predicted_us_per_step: float | None = None
    rejected: dict = field(default_factory=dict)  # strategy -> why it was not chosen

    def __str__(self):
        return f"{self.strategy}: {self.reason}"


def _preference(config: LSTMConfig) -> list:
    # Small batches keep the weights on-chip; larger ones amortise per-step GEMMs.
    gpu = ["persistent", "fused"] if config.batch <= 32 else ["fused", "persistent"]
    return gpu + ["reference"]


def plan(config: LSTMConfig, strategy: str = "auto", training: bool = False) -> Plan:
    if strategy != "auto":
        if strategy not in STRATEGIES:
            raise ConfigError(f"strategy: expected one of {STRATEGIES + ('auto',)}, got {strategy!r}")
        engine = get_engine(strategy)  # raises NotSupported naming the limit
        engine.check(config)
        return Plan(strategy, "requested explicitly")
    rejected = {}
    for candidate in _preference(config):
        try:
            get_engine(candidate).check(config)
        except NotSupported as exc:
            rejected[candidate] = exc.reason
            continue
        why = "only strategy that runs here" if candidate == "reference" else "first feasible GPU strategy"
        if rejected:
            why += "; " + "; ".join(f"{k} excluded: {v}" for k, v in rejected.items())
        return Plan(candidate, why, rejected=rejected)
    raise NotSupported("auto", "no strategy can run this configuration: " + str(rejected))
