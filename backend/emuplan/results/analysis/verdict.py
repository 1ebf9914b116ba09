"""A run's verdict: pass, degraded, fail or not judged, with the reasons ranked by what they cost.

Inputs are plain: the summary's groups (``stats.summarise``; one per collective, size and variant, with
the nccl-tests ``wrong`` count where the log has that column), the run's rank count, the fabric it ran on
(``results.analysis.expected``: NCCL's own model of what a healthy system reaches; None: nothing is expected and the
run is "not judged" unless another check finds a fault) and the stragglers' headline
(``results.analysis.stragglers``). A size sweep (one timing per size) is read by its mean time, a distribution by
its median (p50); % of expected takes busbw from that time, not from a file's two-decimal cells.

Checks, every threshold a field of ``Thresholds`` (its docstring gives the reason for each, calibrated on
the real logs of ``../shared/fixtures/real-logs``; docs/verdicts.md has the table):

- data errors: nccl-tests counted wrong elements (``#wrong`` > 0): fail;
- % of expected where bandwidth dominates (the sizes whose expected latency is at most
  ``bandwidth_bound_latency_share`` of their expected time): the best % of each collective and variant
  there: fail below ``fail_below_pct``, degraded below ``degraded_below_pct``; above ``above_expected_pct``
  a note says the platform's figures, or the model, are off. A sweep that never reaches such a size is not
  judged on bandwidth, and a note says from which size it would be;
- latency-bound sizes below ``latency_floor_pct`` of expected: degraded (healthy systems sit far above it);
- busbw dips where bandwidth dominates: a size more than ``dip_fraction`` below the best smaller one:
  degraded (below that, NCCL's algorithm and protocol switches make dips that healthy systems show too);
- unstable repeats: at least ``min_repeats_for_tail`` repeats whose p99 is over ``max_p99_over_p50`` × p50;
- stragglers: the slowest rank over ``max_straggler_over_median`` × the median rank;
- with a plan (its step cost on the run, ``results.analysis.step_cost``): what one training step's communication
  costs on this fabric against what a healthy one of the platform would take (every planned collective at NCCL's
  expected time over its own group), and the sizes that carry most of the difference. It leads the reasons,
  as a note: it says what the findings cost a step, and the verdict stays the one the list shows for the run.

Reasons come biggest loss first: fails, then degraded ones by the share of expected busbw lost, then notes.
"""

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from emuplan.results.analysis.expected import (
    Expected,
    Fabric,
    FabricError,
    fabric_of,
    group_expectation,
    healthy_time_us,
    measured_busbw_gbps,
)
from emuplan.results.analysis.run_analysis import RunKind
from emuplan.wording import plural
from emuplan.workload.collectives import normalise_op_name

if TYPE_CHECKING:
    from emuplan.workload.platforms import Platform

PASS, DEGRADED, FAIL, NOT_JUDGED = "pass", "degraded", "fail", "not judged"
STATUSES = (PASS, DEGRADED, FAIL, NOT_JUDGED)
# A note explains a figure without moving the verdict.
NOTE = "note"
_RANK = {NOTE: 0, DEGRADED: 1, FAIL: 2}
_STATUS_OF_RANK = (PASS, DEGRADED, FAIL)


@dataclass(frozen=True)
class Thresholds:
    """Where each check draws its line, calibrated on the 18 labelled real logs (docs/verdicts.md):

    - ``degraded_below_pct`` 80: judged against NCCL's own model, the healthy logs reach 89.1–108.3 % of
      expected where bandwidth dominates and the diagnosed faults 11.8–66.5 % (P2P disabled the highest):
      80 sits between, about 10 points from each side.
    - ``fail_below_pct`` 50: half the expected bandwidth is a lost link, a rail down, traffic off its rail
      or staged through the host, not tuning (every diagnosed network fault of the corpus is under 40 %).
    - ``bandwidth_bound_latency_share`` 0.10: a size is judged on bandwidth when its expected latency is at
      most a tenth of its expected time; below that NCCL's protocol and channel choices decide the time.
    - ``latency_floor_pct`` 10: at latency-bound sizes the healthy logs measure 17.0–110.5 % of NCCL's model
      (its latencies assume an idle Intel host and no network latency); under 10 % a size is beyond what any
      healthy system showed (the faults go down to 2.8 %).
    - ``above_expected_pct`` 110: healthy systems measure up to 108.3 % of the model (a tuned 8-node H100
      cluster); beyond 110 % the platform's figures, or the model, are off.
    - ``dip_fraction`` 0.10: where bandwidth dominates busbw rises with size on a healthy fabric (the healthy
      logs' largest step down there is 4.8 %, the faults' 16.8 %); more than 10 % below a smaller size is a
      fault, not noise.
    - ``max_p99_over_p50`` 1.5 with ``min_repeats_for_tail`` 10: a tail needs enough repeats to be one, and
      shared hosts' scheduling noise reaches 1.2× (the demo's 2-core gloo runs: 1.20×); a p99 half again
      the median is beyond it.
    - ``max_straggler_over_median`` 1.25: a collective ends when its last rank does, so a rank 25 % slower
      than the median rank costs every call a quarter.
    """

    degraded_below_pct: float = 80.0
    fail_below_pct: float = 50.0
    bandwidth_bound_latency_share: float = 0.10
    latency_floor_pct: float = 10.0
    above_expected_pct: float = 110.0
    dip_fraction: float = 0.10
    max_p99_over_p50: float = 1.5
    min_repeats_for_tail: int = 10
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
    # The share of the expected busbw lost at that size (the ranking's key among reasons of one severity).
    loss_pct: float | None = None


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
    judged = fabric is not None and ranks is not None and ranks >= 2
    reasons = [
        *_data_errors(groups),
        *(_against_expected(groups, sweep, ranks, fabric, thresholds) if judged else [_not_judged(fabric)]),
        *_unstable(groups, thresholds),
        *_stragglers(stragglers, thresholds),
    ]
    reasons.sort(key=lambda reason: (-_RANK[reason.severity], -(reason.loss_pct or 0)))
    worst = max((_RANK[reason.severity] for reason in reasons), default=0)
    if worst == 0 and any(reason.code == "not-judged" for reason in reasons):
        return Verdict(status=NOT_JUDGED, reasons=reasons, thresholds=thresholds)
    return Verdict(status=_STATUS_OF_RANK[worst], reasons=reasons, thresholds=thresholds)


def judge_summary(
    summary: dict,
    kind: RunKind,
    *,
    ranks: int | None,
    hosts: int | None,
    platform: "Platform | None",
    step: dict | None = None,
) -> Verdict:
    """A run's verdict from its summary (``groups`` with their rates, the stragglers' headline), its rank count
    and hosts and the platform it ran on (its fabric and its thresholds; None: % of expected not judged), and
    ``step``, a plan's step cost on the run (``results.analysis.step_cost``, with the plan's ``name``), when one reads
    it."""
    fabric = fabric_of(platform, ranks, hosts) if platform is not None and ranks and ranks >= 2 else None
    thresholds = (
        Thresholds(degraded_below_pct=platform.degraded_below_pct, fail_below_pct=platform.fail_below_pct)
        if platform is not None
        else None
    )
    verdict = judge_run(
        summary["groups"], kind, ranks=ranks, fabric=fabric, stragglers=summary.get("stragglers"), thresholds=thresholds
    )
    cost = _training_time(step, platform) if step and platform is not None else None
    if cost is None:
        return verdict
    return Verdict(status=verdict.status, reasons=[cost, *verdict.reasons], thresholds=verdict.thresholds)


def _training_time(step: dict, platform: "Platform") -> Reason | None:
    """One training step's communication on this fabric against a healthy one of ``platform``: the sum over the
    plan's collectives (those the run timed) of count per step × NCCL's expected time over the collective's own
    group, and the range of sizes that carries 80 % of the difference."""
    rows = [row for row in step["rows"] if row["step_p50_us"] is not None and row["group_size"] >= 2]
    healthy_time = healthy_time_us(platform)
    healthy = []
    for row in rows:
        op = normalise_op_name(row["op"])
        if op is None:
            continue
        expected_us = healthy_time(op, row["bytes_total"], row["group_size"])
        if expected_us is None:
            return None
        healthy.append((row, row["count_per_step"] * expected_us))
    if not healthy:
        return None
    measured_us = sum(row["step_p50_us"] for row, _ in healthy)
    healthy_us = sum(expected_us for _, expected_us in healthy)
    extra_pct = (measured_us / healthy_us - 1) * 100
    losses = sorted(
        ((row["step_p50_us"] - expected_us, row) for row, expected_us in healthy), key=lambda item: -item[0]
    )
    total_loss = sum(loss for loss, _ in losses if loss > 0)
    where = ""
    if total_loss > 0:
        carried, carriers = 0.0, []
        for loss, row in losses:
            if loss <= 0 or carried >= 0.8 * total_loss:
                break
            carried += loss
            carriers.append(row)
        low, high = min(r["bytes_total"] for r in carriers), max(r["bytes_total"] for r in carriers)
        span = _size(low) if low == high else f"{_size(low)}–{_size(high)}"
        names = [row["label"].split(" (")[0] for row in carriers]
        named = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
        where = (
            f"; {carried / total_loss * 100:.0f} % of the loss is at {span}, in {len(carriers)} of the step's "
            f"{len(healthy)} collectives ({named})"
        )
    missing = [row for row in step["rows"] if row["step_p50_us"] is None]
    unread = (
        f" ({plural(sum(r['count_per_step'] for r in missing), 'planned collective')} the run did not time left out)"
    )
    message = (
        f"{step['plan']['name']}: this fabric costs {_ms(measured_us)} of communication per step; a healthy "
        f"{platform.name} would take {_ms(healthy_us)} ({extra_pct:+.1f} %){where}{unread if missing else ''}"
    )
    return Reason("step-cost", NOTE, message, loss_pct=max(0.0, 100 - healthy_us / measured_us * 100))


def _size(size_bytes: int) -> str:
    """A size to three significant figures in its binary unit: 28351488 B → '27 MiB'."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if size_bytes >= 1 << shift:
            return f"{size_bytes / (1 << shift):.3g} {unit}"
    return f"{size_bytes} B"


def _ms(time_us: float) -> str:
    return f"{time_us / 1000:,.2f} ms" if time_us >= 1000 else f"{time_us:,.1f} µs"


def _label(group: dict) -> str:
    """The group as a reason names it, its size with thousands separators as every headline prints sizes."""
    size = "size unknown" if group.get("size_bytes") is None else f"{group['size_bytes']:,} B"
    return " · ".join(part for part in (group["collective"], size, group.get("variant")) if part)


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


def _data_errors(groups: list[dict]) -> list[Reason]:
    return [
        Reason(
            "data-errors",
            FAIL,
            f"{_label(g)}: nccl-tests counted {g['wrong']} wrong elements (#wrong): not a correct collective",
            **_where(g),
        )
        for g in groups
        if (g.get("wrong") or 0) > 0
    ]


def _not_judged(fabric: Fabric | None) -> Reason:
    missing = (
        "no platform: nothing is expected of the run; name the platform it ran on (the run page's Platform, "
        "emuplan import --platform or emuplan platforms assign, PATCH /api/runs/{id} platform)"
        if fabric is None
        else "no rank count: nothing is expected of the run; give it (the run page's ranks, --ranks, ?ranks=)"
    )
    return Reason("not-judged", NOTE, missing)


def _against_expected(
    groups: list[dict], sweep: bool, ranks: int, fabric: Fabric, thresholds: Thresholds
) -> list[Reason]:
    reasons = []
    for series in _series(groups):
        if normalise_op_name(series[0]["collective"]) is None:
            continue
        judged = []
        for g in (g for g in series if g["size_bytes"] > 0):
            try:
                found = group_expectation(g, sweep, ranks, fabric)
            except FabricError as error:  # a platform that does not fit the run: said, not a failed page
                return [Reason("not-judged", NOTE, f"% of expected is not judged: {error}")]
            if found is not None and found[1] is not None:
                judged.append((found[1], g, found[0]))
        if not judged:
            continue
        bound = [item for item in judged if _bandwidth_bound(item[2], thresholds)]
        reasons += _bandwidth(bound, judged, sweep, ranks, thresholds)
        reasons += _latency_floor([item for item in judged if item not in bound], thresholds)
        reasons += _dips(bound, thresholds)
    return reasons


def _bandwidth_bound(expected: Expected, thresholds: Thresholds) -> bool:
    return expected.latency_us <= thresholds.bandwidth_bound_latency_share * expected.time_us


def _assumed(expected: Expected) -> str:
    return f"NCCL {expected.algorithm}/{expected.protocol} bound by {expected.bounding_level}"


def _bandwidth(
    bound: list[tuple[float, dict, Expected]],
    judged: list[tuple[float, dict, Expected]],
    sweep: bool,
    ranks: int,
    thresholds: Thresholds,
) -> list[Reason]:
    """The best % of expected where bandwidth dominates: what the fabric delivers."""
    if not bound:
        largest = judged[-1][1]
        return [
            Reason(
                "latency-only",
                NOTE,
                f"{largest['label']}: the sweep ends at {largest['size_bytes']:,} B, where latency still decides the "
                f"time ({judged[-1][0]:.1f} % of expected there): bandwidth is not judged",
                **_where(largest),
            )
        ]
    pct, g, expected = max(bound, key=lambda item: item[0])
    measured = measured_busbw_gbps(g, sweep, ranks)
    figures = f"busbw {measured:.2f} GB/s is {pct:.1f} % of the expected {expected.busbw_gbps:.2f} GB/s"
    if pct > thresholds.above_expected_pct:
        message = f"{_label(g)}: {figures} ({_assumed(expected)}): the platform's figures, or the model, are off"
        return [Reason("above-expected", NOTE, message, **_where(g))]
    if pct >= thresholds.degraded_below_pct:
        return []
    severity = FAIL if pct < thresholds.fail_below_pct else DEGRADED
    line = thresholds.fail_below_pct if severity == FAIL else thresholds.degraded_below_pct
    message = (
        f"{_label(g)}: {figures} ({_assumed(expected)}), below {line:g} % (the best size where bandwidth dominates)"
    )
    return [Reason("below-expected", severity, message, **_where(g), loss_pct=100 - pct)]


def _latency_floor(latency_bound: list[tuple[float, dict, Expected]], thresholds: Thresholds) -> list[Reason]:
    """Latency-bound sizes far below NCCL's model: the worst one, and how many more."""
    below = [item for item in latency_bound if item[0] < thresholds.latency_floor_pct]
    if not below:
        return []
    pct, g, expected = min(below, key=lambda item: item[0])
    more = f" (and {len(below) - 1} more sizes)" if len(below) > 1 else ""
    message = (
        f"{_label(g)}: {pct:.1f} % of the expected busbw {expected.busbw_gbps:.2f} GB/s (in "
        f"{expected.time_us:,.1f} µs, {_assumed(expected)}){more}, below {thresholds.latency_floor_pct:g} %"
    )
    return [Reason("latency-far-below-expected", DEGRADED, message, **_where(g), loss_pct=100 - pct)]


def _dips(bound: list[tuple[float, dict, Expected]], thresholds: Thresholds) -> list[Reason]:
    """Where bandwidth dominates, sizes whose % of expected falls more than ``dip_fraction`` below a smaller
    size's (the expected busbw changes little there, so the % ranks the sizes as busbw would)."""
    reasons, best = [], None
    for pct, g, _expected in bound:
        if best is not None and pct < (1 - thresholds.dip_fraction) * best[0]:
            loss = (1 - pct / best[0]) * 100
            reasons.append(
                Reason(
                    "busbw-dip",
                    DEGRADED,
                    f"{_label(g)}: {pct:.1f} % of expected, {loss:.1f} % below the {best[0]:.1f} % of the smaller "
                    f"{best[1]['size_bytes']:,} B",
                    **_where(g),
                    loss_pct=100 - pct,
                )
            )
        if best is None or pct > best[0]:
            best = (pct, g)
    return reasons


def _unstable(groups: list[dict], thresholds: Thresholds) -> list[Reason]:
    reasons = []
    for g in groups:
        if g["count"] < thresholds.min_repeats_for_tail or (g.get("p99_over_p50") or 0) <= thresholds.max_p99_over_p50:
            continue
        slowest = g.get("slowest") or [{}]
        slowest_at = f", slowest iteration {slowest[0]['iteration']}" if "iteration" in slowest[0] else ""
        reasons.append(
            Reason(
                "unstable",
                DEGRADED,
                f"{_label(g)}: p99 {g['p99_us']:,.2f} µs is {g['p99_over_p50']:.2f}× the p50 {g['p50_us']:,.2f} µs "
                f"over {g['count']:,} iterations{slowest_at}, above {thresholds.max_p99_over_p50:g}×",
                **_where(g),
                loss_pct=(1 - 1 / g["p99_over_p50"]) * 100,
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
