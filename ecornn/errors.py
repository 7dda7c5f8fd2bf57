"""Errors raised by ecornn.

Two families matter to callers:
- ``ConfigError`` (a ``ValueError``): the caller passed something wrong; the message names what was
  expected and what came.
- ``NotSupported``: the request is valid, but a strategy cannot run it (capacity, dtype, no GPU).
  The planner catches it and falls back to another strategy.
"""


class EcornnError(Exception):
    """Base class of every ecornn error."""


class ConfigError(EcornnError, ValueError):
    """Invalid input: bad shape, dtype, size or option."""


class NotSupported(EcornnError):
    """A strategy cannot run a (valid) configuration; ``reason`` says which limit was hit."""

    def __init__(self, strategy: str, reason: str):
        super().__init__(f"strategy {strategy!r} does not support this configuration: {reason}")
        self.strategy = strategy
        self.reason = reason


def expect(condition: bool, what: str, expected, got) -> None:
    """Raise ConfigError("<what>: expected <expected>, got <got>") unless condition holds."""
    if not condition:
        raise ConfigError(f"{what}: expected {expected}, got {got}")
