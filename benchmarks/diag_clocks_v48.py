"""v48 diagnostic: are the slow rounds of a persistent forward the GPU's clock? Rounds of the fp32 H=1024 B=8
kernel read 2.38 or 2.73 µs/step in one process (v48's call 1), and the buffers' addresses do not decide it
(diag_buffer_address_v48). Here nvidia-smi samples the SM clock, power, temperature and the clock-event reasons
every 50 ms while the cells are timed back to back (whole forward and kernel alone, alternated, each
measurement stamped); every measurement is then paired with the samples taken during it.

    python benchmarks/diag_clocks_v48.py OUT_DIR [--seconds S]
Writes OUT_DIR/diag_clocks_v48.{json,md}.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ab_modes import whole_forward_us  # noqa: E402
from bench_persistent import STEPS, _median_ms, _problem, bench_args, bench_meta, kernel_launcher  # noqa: E402

CELLS = [("float32", 1024, 8), ("float16", 1024, 16), ("bfloat16", 1024, 4), ("float32", 1024, 4)]
QUERY = "timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active"


def _sampler(path: Path):
    """nvidia-smi sampling into ``path``; drivers before clocks_event_reasons know clocks_throttle_reasons."""
    for query in (QUERY, QUERY.replace("clocks_event_reasons", "clocks_throttle_reasons")):
        proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits", "-lms", "50"],
                                stdout=open(path, "w"), stderr=subprocess.STDOUT)
        time.sleep(0.5)
        if proc.poll() is None:
            return proc
    raise RuntimeError(f"nvidia-smi could not sample: {path.read_text()[:300]}")


def _samples(path: Path) -> list:
    """[(unix seconds, sm MHz, mem MHz, watts, °C, reasons)] of the sampler's lines."""
    from datetime import datetime
    out = []
    for line in path.read_text().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 6:
            continue
        try:
            stamp = datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((stamp, float(parts[1]), float(parts[2]), float(parts[3]), float(parts[4]), parts[5]))
        except ValueError:
            continue
    return out


def _measurements(seconds: float) -> list:
    """[(cell, what, start, end, µs/step)] over ``seconds`` of back-to-back timing of every cell."""
    from ecornn.engines import persistent
    setups = []
    for dtype, hidden, batch in CELLS:
        config, weights, x, h0, c0 = _problem(dtype, hidden, batch, seed=hidden + batch)
        prepared = persistent.prepare(config, weights)
        plan = persistent._final(persistent.plans_for(config, False)["forward"])
        kernel = kernel_launcher(config, prepared, x, h0, c0, plan)
        whole_forward_us(config, weights, x, h0, c0, prepared, 3)   # captures the graph
        setups.append((f"{dtype} H={hidden} B={batch}", kernel, (config, weights, x, h0, c0, prepared)))
    out, stop = [], time.time() + seconds
    while time.time() < stop:
        for name, kernel, problem in setups:
            for what in ("forward", "kernel"):
                start = time.time()
                us = whole_forward_us(*problem, 20) if what == "forward" else _median_ms(kernel, 20) * 1e3 / STEPS
                out.append((name, what, start, time.time(), us))
    return out


def _paired(measurements, samples) -> list:
    rows = []
    for name, what, start, end, us in measurements:
        during = [s for s in samples if start - 0.03 <= s[0] <= end + 0.03]
        rows.append({"cell": name, "what": what, "start": start, "us_per_step": us,
                     "sm_mhz": float(np.median([s[1] for s in during])) if during else None,
                     "watts": float(np.median([s[3] for s in during])) if during else None,
                     "celsius": float(np.median([s[4] for s in during])) if during else None,
                     "reasons": sorted({s[5] for s in during})})
    return rows


def markdown(rows) -> str:
    lines = []
    for cell in dict.fromkeys(r["cell"] for r in rows):
        for what in ("forward", "kernel"):
            sel = [r for r in rows if r["cell"] == cell and r["what"] == what and r["sm_mhz"]]
            if not sel:
                continue
            us = np.array([r["us_per_step"] for r in sel])
            mhz = np.array([r["sm_mhz"] for r in sel])
            corr = float(np.corrcoef(us, mhz)[0, 1]) if us.std() > 0 and mhz.std() > 0 else 0.0
            slow = us > np.median(us) * 1.05
            lines.append(f"- {cell} {what}: {len(sel)} runs, µs/step {us.min():.2f}–{us.max():.2f} (median "
                         f"{np.median(us):.2f}); SM clock {mhz.min():.0f}–{mhz.max():.0f} MHz; correlation "
                         f"{corr:+.2f}; slow runs (> 1.05x median) {int(slow.sum())}, their clocks "
                         f"{', '.join(f'{m:.0f}' for m in mhz[slow][:8]) or '-'}")
    reasons = sorted({x for r in rows for x in r["reasons"]})
    watts = [r["watts"] for r in rows if r["watts"]]
    temps = [r["celsius"] for r in rows if r["celsius"]]
    if watts:
        lines.append(f"- power {min(watts):.0f}–{max(watts):.0f} W, temperature {min(temps):.0f}–{max(temps):.0f} °C; "
                     f"clock-event reasons seen: {', '.join(reasons)}")
    return "\n".join(lines)


def main(argv=None):
    args, out = bench_args(argv, configure=lambda p: p.add_argument("--seconds", type=float, default=60.0))
    log = out / "diag_clocks_v48_samples.csv"
    sampler = _sampler(log)
    try:
        measurements = _measurements(args.seconds)
    finally:
        time.sleep(0.2)
        sampler.terminate()
        sampler.wait()
    rows = _paired(measurements, _samples(log))
    text = markdown(rows)
    print(text)
    (out / "diag_clocks_v48.json").write_text(json.dumps({"meta": bench_meta(), "rows": rows}, indent=1))
    (out / "diag_clocks_v48.md").write_text(json.dumps(bench_meta()) + "\n\n" + text + "\n")


if __name__ == "__main__":
    main()
