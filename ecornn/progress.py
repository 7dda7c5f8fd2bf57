"""A dependency-free progress bar that appears only once a run has lasted over a second."""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, label: str = "", stream=None, delay_s: float = 1.0):
        self.total, self.label, self.done = total, label, 0
        self.stream = stream or sys.stderr
        self.start = time.perf_counter()
        self.delay_s = delay_s
        self.shown = False

    def update(self, n: int = 1) -> None:
        self.done += n
        elapsed = time.perf_counter() - self.start
        if elapsed < self.delay_s and not self.shown:
            return
        self.shown = True
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        eta = elapsed / max(self.done, 1) * (self.total - self.done)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                          f"{self.done}/{self.total} {elapsed:5.1f}s eta {eta:4.1f}s")
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
