"""Paired A/B rounds shared by the benches: every case runs once per round, in an order that rotates
from round to round, so a load spike on the shared machine hits the cases of one round alike and
their ratio stays honest. Figures are medians with the min–max over the rounds."""

import statistics
import subprocess
import time
import urllib.request
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def paired_rounds(cases: dict[str, Callable[[], T]], rounds: int) -> dict[str, list[T]]:
    """``{case: [value of round 1, round 2, ...]}``; each case returns the figure (or figures) it measured."""
    names = list(cases)
    values: dict[str, list[T]] = {name: [] for name in names}
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            values[name].append(cases[name]())
    return values


def ratios(values: dict[str, list[float]], case: str, baseline: str) -> list[float]:
    """Per-round ratio case / baseline."""
    return [a / b for a, b in zip(values[case], values[baseline], strict=True)]


def spread(samples: Sequence[float], digits: int = 3, unit: str = "") -> str:
    """``median (min–max)``."""
    return f"{statistics.median(samples):.{digits}f}{unit} ({min(samples):.{digits}f}–{max(samples):.{digits}f}{unit})"


def wall_seconds(command: Sequence[str], **run_options) -> float:
    """Wall time of one run of ``command`` in a fresh process, as a user's shell would start it."""
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, **run_options)
    return time.perf_counter() - started


def median_get_seconds(url: str, requests: int, headers: dict[str, str] | None = None) -> float:
    """The median wall time of ``requests`` GETs of ``url`` (each must answer 200)."""
    (median,) = interleaved_get_seconds([url], requests, headers)
    return median


def interleaved_get_seconds(urls: Sequence[str], requests: int, headers: dict[str, str] | None = None) -> list[float]:
    """The median wall time of ``requests`` GETs of each of ``urls``, asked in turn (A B A B …) so that a
    load spike on the shared machine hits them alike (each must answer 200)."""
    times: list[list[float]] = [[] for _ in urls]
    for _ in range(requests):
        for url, url_times in zip(urls, times, strict=True):
            start = time.perf_counter()
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=120) as response:
                response.read()
                assert response.status == 200, url
            url_times.append(time.perf_counter() - start)
    return [statistics.median(url_times) for url_times in times]


def ratio_line(
    name: str, baseline: tuple[str, list[float]], case: tuple[str, list[float]], limit: float
) -> tuple[str, bool]:
    """One printed line: both cases' times (seconds in, ms out) and their per-round ratio against ``limit``;
    and whether the median ratio kept to it."""
    (baseline_label, baseline_s), (case_label, case_s) = baseline, case
    ratio = [a / b for a, b in zip(case_s, baseline_s, strict=True)]
    ok = statistics.median(ratio) <= limit
    line = (
        f"  {name:<10} {baseline_label} {spread([v * 1e3 for v in baseline_s], 1, ' ms')}; "
        f"{case_label} {spread([v * 1e3 for v in case_s], 1, ' ms')}; "
        f"ratio {spread(ratio, 2)}x (target ≤ {limit}x) {'ok' if ok else 'MISSED'}"
    )
    return line, ok


def load_average() -> str:
    with open("/proc/loadavg") as loadavg:
        return " ".join(loadavg.read().split()[:3])


def print_growth(
    values: dict[str, list[tuple[float, float]]], sizes: tuple[int, int], limit: float, width: int
) -> bool:
    """Each case's (small, large) timings as a ratio line (the large size ÷ the small one against ``limit``), then
    the load; True when every case is within it."""
    small, large = sizes
    all_ok = True
    for case, timings in values.items():
        small_s, large_s = zip(*timings, strict=True)
        line, ok = ratio_line(
            f"{case:<{width}}", (f"{small:>6,} runs", list(small_s)), (f"{large:,} runs", list(large_s)), limit
        )
        print(line)
        all_ok &= ok
    print(f"  load average after: {load_average()}")
    return all_ok


def missed_targets(checks: Sequence[tuple[str, Sequence[float], float]]) -> bool:
    """Print each check (name, per-round ratios, target) as its median and spread against the target, ok or
    MISSED; whether any missed."""
    missed = False
    for name, samples, limit in checks:
        ok = statistics.median(samples) <= limit
        missed |= not ok
        print(f"  {name:<32} {spread(samples, digits=2)}x (target ≤ {limit}x) {'ok' if ok else 'MISSED'}")
    return missed
