"""A run's verdict: pass, degraded or fail, with the reasons, from what the run's summary already holds.

Inputs are plain: the summary's groups (``stats.summarise``; one per collective, size and variant, with
the nccl-tests ``wrong`` count where the log has that column), the run's rank count, the fabric it ran on
(``results.expected``; None: % of expected is not judged, and a reason says so) and the stragglers'
headline (``results.stragglers``). A size sweep (one timing per size) is read by its mean time, a
distribution by its median (p50); % of expected takes busbw from that time, not from a file's two-decimal
cells.

Checks, in order of severity, every threshold a field of ``Thresholds``:

- data errors: nccl-tests counted wrong elements (``#wrong`` > 0): fail — the numbers are not of a
  correct collective;
- % of expected at the large sizes (``results.expected``): the best % of each collective and variant over
  its sizes from ``large_size_bytes`` up (the bandwidth the run reached where latency no longer counts;
  a collapse at one large size is a dip, below): fail below ``fail_below_pct``, degraded below
  ``degraded_below_pct``; above 100 anywhere, a note says the fabric's figures (or the model: NVLS,
  SHARP) are off;
- busbw dips: past the latency-bound region, a size whose busbw falls more than ``dip_fraction`` below the
  best smaller size of its series: degraded;
- unstable repeats: a group whose p99 is more than ``max_p99_over_p50`` × its p50: degraded;
- stragglers: the slowest rank over ``max_straggler_over_median`` × the median rank: degraded.
"""

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from emuplan.results.analysis import RunKind, file_or_ours
from emuplan.results.expected import (
    Fabric,
    FabricError,
    fabric_of,
    group_expectation,
    measured_busbw_gbps,
    measured_time_us,
)
from emuplan.workload.collectives import normalise_op_name

if TYPE_CHECKING:
    from emuplan.workload.platforms import Platform

PASS, DEGRADED, FAIL = "pass", "degraded", "fail"
# A note explains a figure without moving the verdict.
NOTE = "note"
_RANK = {NOTE: 0, DEGRADED: 1, FAIL: 2}
_STATUS_OF_RANK = (PASS, DEGRADED, FAIL)


@dataclass(frozen=True)
class Thresholds:
    """Where each check draws its line. The defaults, and why:

    - ``degraded_below_pct`` 80: NVIDIA's and cloud vendors' acceptance runs call a fabric healthy when
      large all-reduces reach about 80 % or more of its bandwidth (the α-β model has no protocol or
      kernel overheads; a healthy NVLink or InfiniBand fabric measures 80–95 % of it at 1 GiB and up).
    - ``fail_below_pct`` 50: half the expected bandwidth is a lost link, a rail down or traffic off its
      rail, not tuning.
    - ``large_size_bytes`` 1 GiB: the sizes % of expected is judged on, by the best of them (or, if the
      run has none, its largest size). From 1 GiB the time is mostly bandwidth (the α terms of even a
      72-rank NVLink 5 ring at 1 µs a step are 6 % of it), so the figure judges the bandwidth the fabric
      delivers; nccl-tests sweeps commonly end at 1–8 GiB.
    - ``latency_bound_factor`` 2: sizes faster than twice a series' smallest time are latency-bound (the
      time is the fixed launch and α cost; busbw is a few rounded hundredths), never judged as dips.
    - ``dip_fraction`` 0.10: past that region busbw rises with size on a healthy fabric; a drop of more
      than 10 % below a smaller size is beyond the few-percent noise between neighbouring sizes.
    - ``max_p99_over_p50`` 1.2: repeats or iterations of one size whose p99 is 20 % above their median
      disagree (with a handful of repeats, p99 is the slowest one).
    - ``max_straggler_over_median`` 1.25: a collective ends when its last rank does, so a rank 25 % slower
      than the median rank costs every call a quarter.
    """

    degraded_below_pct: float = 80.0
    fail_below_pct: float = 50.0
    large_size_bytes: int = 1 << 30
    latency_bound_factor: float = 2.0
    dip_fraction: float = 0.10
    max_p99_over_p50: float = 1.2
    max_straggler_over_median: float = 1.25


@dataclass(frozen=True)
class Reason:
    """One finding: a stable code, its severity (fail, degraded or note) and a one-line message naming the
    size, variant, iteration or rank and the figures; the group it concerns when there is one."""

    code: str
    severity: str
    message: str
    collective: str | None = None
    size_bytes: int | None = None
    variant: str | None = None


@dataclass(frozen=True)
class Verdict:
    status: str
    reasons: list[Reason] = field(default_factory=list)
    thresholds: Thresholds = field(default_factory=Thresholds)

    def as_dict(self) -> dict:
        return asdict(self)


def judge_run(
    groups: list[dict],
    kind: RunKind,
    *,
    ranks: int | None,
    fabric: Fabric | None,
    stragglers: dict | None = None,
    thresholds: Thresholds | None = None,
) -> Verdict:
    """The verdict of a run from its summary's groups (module docstring)."""
    thresholds = thresholds or Thresholds()
    sweep = kind == "size-sweep"
    reasons = [
        *_data_errors(groups),
        *_below_expected(groups, sweep, ranks, fabric, thresholds),
        *_dips(groups, sweep, thresholds),
        *_unstable(groups, thresholds),
        *_stragglers(stragglers, thresholds),
    ]
    reasons.sort(key=lambda reason: -_RANK[reason.severity])
    worst = max((_RANK[reason.severity] for reason in reasons), default=0)
    return Verdict(status=_STATUS_OF_RANK[worst], reasons=reasons, thresholds=thresholds)


def judge_summary(
    summary: dict, kind: RunKind, *, ranks: int | None, hosts: int | None, platform: "Platform | None"
) -> Verdict:
    """A run's verdict from its summary (``groups`` with their rates, the stragglers' headline), its rank count
    and hosts and the platform it ran on (its fabric and its thresholds; None: % of expected not judged)."""
    fabric = fabric_of(platform, ranks, hosts) if platform is not None and ranks else None
    thresholds = (
        Thresholds(degraded_below_pct=platform.degraded_below_pct, fail_below_pct=platform.fail_below_pct)
        if platform is not None
        else None
    )
    return judge_run(
        summary["groups"], kind, ranks=ranks, fabric=fabric, stragglers=summary.get("stragglers"), thresholds=thresholds
    )


def _where(group: dict) -> dict:
    return {"collective": group["collective"], "size_bytes": group["size_bytes"], "variant": group["variant"]}


def _series(groups: list[dict]) -> list[list[dict]]:
    """The groups of each (collective, variant) with a size, by size."""
    keys = dict.fromkeys((g["collective"], g["variant"]) for g in groups if g.get("size_bytes") is not None)
    return [
        sorted((g for g in groups if (g["collective"], g["variant"]) == key and g.get("size_bytes") is not None),
               key=lambda g: g["size_bytes"])
        for key in keys
    ]  # fmt: skip


def _rates(series: list[dict], sweep: bool) -> list[float] | None:
    """busbw of every size of a series (else algbw, when a size lacks busbw) as the run shows it: the file's
    cell or ours at the mean for a sweep, ours at the p50 for a distribution; None without either."""
    for key in ("busbw_gbps", "algbw_gbps"):
        rates = [file_or_ours(g, key) if sweep else g.get(f"{key}_p50") for g in series]
        if all(rate is not None for rate in rates):
            return rates
    return None


def _data_errors(groups: list[dict]) -> list[Reason]:
    return [
        Reason(
            "data-errors",
            FAIL,
            f"{g['label']}: nccl-tests counted {g['wrong']} wrong elements (#wrong): not a correct collective",
            **_where(g),
        )
        for g in groups
        if (g.get("wrong") or 0) > 0
    ]


def _below_expected(
    groups: list[dict], sweep: bool, ranks: int | None, fabric: Fabric | None, thresholds: Thresholds
) -> list[Reason]:
    if fabric is None or ranks is None or ranks < 2:
        missing = "no platform" if fabric is None else "no rank count"
        return [Reason("not-judged", NOTE, f"{missing}: % of expected is not judged")]
    reasons = []
    for series in _series(groups):
        op = normalise_op_name(series[0]["collective"])
        if op is None:
            continue
        judged = []
        for g in (g for g in series if g["size_bytes"] > 0):
            try:
                expected, pct = group_expectation(g, sweep, ranks, fabric)
            except FabricError as error:  # a platform that does not fit the run: said, not a failed page
                return [Reason("not-judged", NOTE, f"% of expected is not judged: {error}")]
            if pct is not None:
                judged.append((pct, g, expected))
        if not judged:
            continue
        highest = max(judged, key=lambda item: item[0])
        if highest[0] > 100.0:
            pct, g, expected = highest
            reasons.append(
                Reason(
                    "above-expected",
                    NOTE,
                    f"{g['label']}: {pct:.2f} % of expected ({expected.busbw_gbps:.2f} GB/s, {expected.algorithm} "
                    f"bound by {expected.bounding_level}): the platform's figures, or the model, are off",
                    **_where(g),
                )
            )
        large = [item for item in judged if item[1]["size_bytes"] >= thresholds.large_size_bytes]
        best_pct, g, expected = max(large or [judged[-1]], key=lambda item: item[0])
        severity = (
            FAIL
            if best_pct < thresholds.fail_below_pct
            else DEGRADED
            if best_pct < thresholds.degraded_below_pct
            else None
        )
        if severity is not None:
            line = thresholds.fail_below_pct if severity == FAIL else thresholds.degraded_below_pct
            measured = measured_busbw_gbps(g, sweep, ranks)
            scope = f"the best size from {thresholds.large_size_bytes} B up" if large else "the largest size"
            reasons.append(
                Reason(
                    "below-expected",
                    severity,
                    f"{g['label']}: busbw {measured:.2f} GB/s is {best_pct:.2f} % of the expected "
                    f"{expected.busbw_gbps:.2f} GB/s ({expected.algorithm} bound by {expected.bounding_level}), "
                    f"below {line:g} % ({scope})",
                    **_where(g),
                )
            )
    return reasons


def _dips(groups: list[dict], sweep: bool, thresholds: Thresholds) -> list[Reason]:
    """Past the latency-bound region, sizes whose busbw falls more than ``dip_fraction`` below the best
    smaller size of the same collective and variant (``_rates``; no ranks needed: in one series the bus
    factor is one constant, so busbw or algbw rank the sizes alike)."""
    reasons = []
    for series in _series(groups):
        rates = _rates(series, sweep)
        if rates is None:
            continue
        fastest_us = min(measured_time_us(g, sweep) for g in series)
        best_index = None
        for index, (g, rate) in enumerate(zip(series, rates, strict=True)):
            past_latency = measured_time_us(g, sweep) >= thresholds.latency_bound_factor * fastest_us
            if past_latency and best_index is not None and rate < (1 - thresholds.dip_fraction) * rates[best_index]:
                best = series[best_index]
                reasons.append(
                    Reason(
                        "busbw-dip",
                        DEGRADED,
                        f"{g['label']}: busbw {rate:.2f} GB/s ({measured_time_us(g, sweep):.2f} µs) is "
                        f"{(1 - rate / rates[best_index]) * 100:.1f} % below {rates[best_index]:.2f} GB/s at the "
                        f"smaller {best['size_bytes']} B",
                        **_where(g),
                    )
                )
            if best_index is None or rate > rates[best_index]:
                best_index = index
    return reasons


def _unstable(groups: list[dict], thresholds: Thresholds) -> list[Reason]:
    reasons = []
    for g in groups:
        if g["count"] < 2 or (g.get("p99_over_p50") or 0) <= thresholds.max_p99_over_p50:
            continue
        slowest = g.get("slowest") or [{}]
        slowest_at = f", slowest iteration {slowest[0]['iteration']}" if "iteration" in slowest[0] else ""
        reasons.append(
            Reason(
                "unstable",
                DEGRADED,
                f"{g['label']}: p99 {g['p99_us']:.2f} µs is {g['p99_over_p50']:.2f}× the p50 {g['p50_us']:.2f} µs "
                f"over {g['count']} iterations{slowest_at}, above {thresholds.max_p99_over_p50:g}×",
                **_where(g),
            )
        )
    return reasons


def _stragglers(stragglers: dict | None, thresholds: Thresholds) -> list[Reason]:
    slowest = (stragglers or {}).get("slowest_rank")
    if slowest is None or slowest["over_median"] <= thresholds.max_straggler_over_median:
        return []
    unit = stragglers.get("unit", "rank")
    host = f" on {slowest['host']}" if slowest.get("host") else ""
    return [
        Reason(
            "straggler",
            DEGRADED,
            f"{unit} {slowest['name']}{host} takes {slowest['over_median']:.2f}× the median {unit}'s time over "
            f"{slowest['calls']} calls ({slowest['lost_per_call_us']:.2f} µs lost per call), above "
            f"{thresholds.max_straggler_over_median:g}×",
        )
    ]
