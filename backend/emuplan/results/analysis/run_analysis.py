"""What a run page, ``emuplan stats`` and ``GET /api/runs/{id}/stats`` show beyond the cached statistics,
for the assumptions the reader chooses (link speed, α, ranks): rates and % of ideal per group, the
nccl-tests view of a size sweep, and the slowest trials of a per-iteration run.

Assumptions come from the request, else the linked plan, else the file (ranks), else the settings; each
figure says where it came from. Nothing here reads a run's samples: the summary cached at import has all
it needs, so changing an assumption costs microseconds.

nccl-tests' "# Avg bus bandwidth" is the plain mean of the busbw of every size, out-of-place and in-place
together (``src/common.cu``: each timed test adds its busBw to ``bw`` and counts it in ``bw_count``; the
line prints ``bw / bw_count`` with ``%g``). nccl-tests sums the unrounded values; a log only holds the cells
rounded to two decimals, so the mean of the cells can differ from the printed line by at most half a unit
of the cells' last digit, ``CELL_HALF_UNIT_GBPS``.
"""

from dataclasses import asdict, dataclass
from typing import Literal

from emuplan.results.analysis.expected import Fabric, FabricError, group_expectation
from emuplan.results.analysis.stats import NetworkModel, group_rates
from emuplan.wording import percent, time_unit
from emuplan.workload.collectives import bus_bandwidth_gbps, ideal_time_s, normalise_op_name
from emuplan.workload.document import PlanDocument

CELL_HALF_UNIT_GBPS = 0.005
SLOWEST_SHOWN = 10
# A first iteration that stands out: slower than the run's p99 and than twice its p50.
WARM_UP_OVER_P50 = 2.0


@dataclass(frozen=True)
class Assumptions:
    """The network the ideal time and the expected curve assume, and where each figure came from."""

    link_gbps: float
    latency_us: float
    ranks: int | None
    sources: dict[str, str]

    @property
    def link_applied(self) -> bool:
        """Whether the link speed was given (the request, the plan): the server's fallback is never applied
        silently, so without one there is no ideal time, no % of ideal and no α-β expected curve."""
        return self.sources.get("link_gbps") != "settings"

    @property
    def ceiling_gbps(self) -> float | None:
        """The line rate in GB/s: busbw cannot pass it on a link of ``link_gbps`` Gbit/s per rank."""
        return self.link_gbps / 8.0 if self.link_applied else None


def resolve_assumptions(
    *,
    link_gbps: float | None = None,
    latency_us: float | None = None,
    ranks: int | None = None,
    plan: PlanDocument | None = None,
    file_ranks: int | None = None,
    file_ranks_inferred: bool = False,
    default_link_gbps: float,
    default_latency_us: float,
) -> Assumptions:
    """Each assumption from the first of: the request, the linked plan, the file (ranks; "inferred" where the
    file's rank count was inferred rather than read, as from nccl-tests' busbw/algbw factor), the settings."""
    plan_link_gbps, plan_latency_us, plan_ranks = (
        (plan.network.link_gbps, plan.network.latency_us, plan.inputs.gpus) if plan else (None, None, None)
    )
    chosen, sources = {}, {}
    candidates = {
        "link_gbps": (("query", link_gbps), ("plan", plan_link_gbps), ("settings", default_link_gbps)),
        "latency_us": (("query", latency_us), ("plan", plan_latency_us), ("settings", default_latency_us)),
        "ranks": (("query", ranks), ("plan", plan_ranks), ("inferred" if file_ranks_inferred else "file", file_ranks)),
    }
    for name, options in candidates.items():
        source, value = next(((s, v) for s, v in options if v is not None), ("none", None))
        chosen[name], sources[name] = value, source
    if chosen["link_gbps"] <= 0:
        raise ValueError(f"link_gbps: must be positive, got {chosen['link_gbps']}")
    if chosen["latency_us"] < 0:
        raise ValueError(f"latency_us: must not be negative, got {chosen['latency_us']}")
    if chosen["ranks"] is not None and chosen["ranks"] < 1:
        raise ValueError(f"ranks: must be at least 1, got {chosen['ranks']}")
    return Assumptions(
        link_gbps=float(chosen["link_gbps"]),
        latency_us=float(chosen["latency_us"]),
        ranks=int(chosen["ranks"]) if chosen["ranks"] is not None else None,
        sources=sources,
    )


def page_time_unit(summaries: list[dict]) -> tuple[str, float]:
    """The one time unit of a page showing these runs: from the largest of their typical (p50) times."""
    return time_unit(max((summary["overall"]["p50_us"] for summary in summaries), default=0.0))


# The most samples any (collective, data size, variant) of a size sweep has. nccl-tests prints one line per
# size; users who repeat a sweep (``-N`` run cycles, ``-n 4 -I 1``, logs of a few runs pasted together) bring
# 2-4 values per size. The seed tutorials read KCCB's 8 trials per size as a CDF and a delay chart, so 8 must
# stay a distribution. 4 is the most repeats still "a few": at 4 samples nearest-rank p90, p99, p99.9 and the
# max are one and the same value, so percentiles would only repeat it, and the mean is the sweep's figure.
SWEEP_MAX_SAMPLES = 4
RunKind = Literal["size-sweep", "distribution"]


def run_kind(groups: list[dict]) -> RunKind:
    """How a run is read, decided once at import and stored (``run.kind``): a size sweep (a known data size
    and at most ``SWEEP_MAX_SAMPLES`` samples in every group: a bandwidth-vs-size curve, compared size by
    size) or a distribution (many iterations per size: CDF, percentiles, delay chart, KS test)."""
    if groups and all(g["count"] <= SWEEP_MAX_SAMPLES and g.get("size_bytes") is not None for g in groups):
        return "size-sweep"
    return "distribution"


def peak_busbw(groups: list[dict]) -> tuple[float, dict] | tuple[None, None]:
    """The largest busbw cell of these groups (as the file printed it, else ours) and its group."""
    cells = [(cell, g) for g in groups if (cell := file_or_ours(g, "busbw_gbps")) is not None]
    return max(cells, key=lambda pair: pair[0]) if cells else (None, None)


def analyse(
    summary: dict,
    kind: RunKind,
    assumptions: Assumptions,
    plan: PlanDocument | None = None,
    fabric: Fabric | None = None,
) -> dict:
    """The groups' rates under ``assumptions``, plus ``sweep`` (size sweeps) or ``trials`` (distributions);
    ``kind`` is the run's stored ``run_kind``.

    ``fabric`` (the run's platform, ``expected.fabric_of``) adds each group's expected busbw, the algorithm
    and level that bound it and the % of it reached (``expected_note`` says why not, when the platform does
    not fit the run)."""
    link = assumptions.link_gbps if assumptions.link_applied else None
    network = NetworkModel(link, assumptions.latency_us, plan.collectives if plan else [])
    groups = [{**group, **group_rates(group, network, assumptions.ranks)} for group in summary["groups"]]
    sweep = kind == "size-sweep"
    unit, per_unit = page_time_unit([summary])
    result = {
        "assumptions": {
            **asdict(assumptions),
            "ceiling_gbps": assumptions.ceiling_gbps,
            "link_applied": assumptions.link_applied,
        },
        "time_unit": unit,
        "us_per_unit": per_unit,
        "groups": groups,
        "above_ideal_pct": above_ideal_pct(groups),
        "expected_note": _add_expected(groups, sweep, assumptions.ranks, fabric),
    }
    result["kind"] = kind
    if sweep:
        result["sweep"] = size_sweep(groups, summary.get("reported_avg_busbw_gbps") or {}, assumptions)
    else:
        result["trials"] = [_trials(group) for group in groups if group.get("slowest")]
    return result


def _add_expected(groups: list[dict], sweep: bool, ranks: int | None, fabric: Fabric | None) -> str | None:
    """Each group's expected busbw on ``fabric`` and the % of it reached (``results.analysis.expected``), in place;
    what stood in the way, if anything."""
    if fabric is None:
        return "no platform: no expected curve or % of expected"
    if ranks is None or ranks < 2:
        return "no rank count: nothing is expected of the run"
    for group in groups:
        try:
            found = group_expectation(group, sweep, ranks, fabric)
        except FabricError as error:
            return f"the platform does not fit the run: {error}"
        if found is not None:
            expected, pct = found
            group.update(expected_busbw_gbps=expected.busbw_gbps, pct_of_expected=pct,
                         expected_algorithm=expected.algorithm, expected_protocol=expected.protocol,
                         expected_bound=expected.bounding_level,
                         expected_latency_share=expected.latency_us / expected.time_us)  # fmt: skip
    return None


def above_ideal_pct(groups: list[dict]) -> float | None:
    """The highest % of ideal of these groups when it is over 100, else None. Over 100 means the run
    moved data faster than the α-β model allows on the assumed link: the assumption, not the run, is off
    (an NVLink log read against a 100 Gbit/s NIC), and the pages and the CLI say so."""
    figures = [g[key] for g in groups for key in ("pct_of_ideal", "pct_of_ideal_p50") if g.get(key) is not None]
    highest = max(figures, default=None)
    return highest if highest is not None and highest > 100.0 else None


def above_ideal_warning(over: list[tuple[str, float, dict]]) -> str | None:
    """What the run page, the compare and share pages and the CLI say when % of ideal passes 100, in the
    same words: ``over`` lists each such run as (its name, its highest %, its assumptions); the warning
    names them, the highest figure and the link it was read against, and what to do."""
    if not over:
        return None
    name, highest, assumptions = max(over, key=lambda entry: entry[1])
    which = f" ({name})" if len(over) > 1 else ""
    return (
        f"Above 100% of ideal in {', '.join(entry[0] for entry in over)}: up to {percent(highest)}%{which} at "
        f"{assumptions['link_gbps']:g} Gbit/s per rank and α {assumptions['latency_us']:g} µs. The collectives "
        "ran faster than the α-β model allows on that link, so the assumed link is slower than the fabric "
        "measured: set the link speed (and α) the fabric really has (NVLink, say) for a % of ideal that means "
        "something."
    )


def expected_busbw_gbps(collective: str, size_bytes: int, assumptions: Assumptions) -> float | None:
    """busbw the α-β ring expects at this size on the assumed link (nccl-tests convention), or None without
    ranks or a given link: every rank on one link of the assumed speed (``collectives.ideal_time_s``)."""
    op = normalise_op_name(collective)
    if op is None or assumptions.ranks is None or assumptions.ranks < 2 or size_bytes <= 0:
        return None
    if not assumptions.link_applied:
        return None
    seconds = ideal_time_s(op, size_bytes, assumptions.ranks, assumptions.link_gbps, assumptions.latency_us)
    return bus_bandwidth_gbps(op, size_bytes, seconds, assumptions.ranks)


def file_or_ours(group: dict, key: str) -> float | None:
    """The figure the file printed for this size and variant (nccl-tests, KAI), else ours."""
    reported = group.get(f"reported_{key}")
    return reported if reported is not None else group.get(key)


def size_sweep(groups: list[dict], reported_avg: dict[str, float], assumptions: Assumptions) -> dict:
    """Per collective: headline (peak and average busbw, the file's own average beside ours) and one
    table per variant, rows by size; each row has the α-β expected busbw for the expected curve."""
    collectives = []
    for collective in dict.fromkeys(g["collective"] for g in groups):
        members = [g for g in groups if g["collective"] == collective]
        cells = [(cell, g) for g in members if (cell := file_or_ours(g, "busbw_gbps")) is not None]
        average = sum(cell for cell, _ in cells) / len(cells) if cells else None
        peak_cell, peak_group = peak_busbw(members)
        file_average = reported_avg.get(collective)
        tables = []
        for variant in dict.fromkeys(g["variant"] for g in members):
            rows = sorted((g for g in members if g["variant"] == variant), key=lambda g: g["size_bytes"])
            tables.append(
                {
                    "variant": variant,
                    "rows": [
                        {
                            "size_bytes": g["size_bytes"],
                            "elements": g.get("elements"),
                            "dtype": g.get("dtype"),
                            "time_us": g["mean_us"],
                            "algbw_gbps": file_or_ours(g, "algbw_gbps"),
                            "busbw_gbps": file_or_ours(g, "busbw_gbps"),
                            "pct_of_ideal": g.get("pct_of_ideal"),
                            "printed": g.get("printed", {}),
                            "expected_busbw_gbps": g.get("expected_busbw_gbps")
                            or expected_busbw_gbps(collective, g["size_bytes"], assumptions),
                            "pct_of_expected": g.get("pct_of_expected"),
                        }
                        for g in rows
                    ],
                }
            )
        collectives.append(
            {
                "collective": collective,
                "sizes": len({g["size_bytes"] for g in members}),
                "average_busbw_gbps": average,
                "averaged_cells": len(cells),
                "file_average_busbw_gbps": file_average,
                "agrees_with_file": None
                if file_average is None or average is None
                else abs(average - file_average) <= CELL_HALF_UNIT_GBPS + 1e-9,
                "peak_busbw_gbps": peak_cell,
                "peak_busbw_printed": peak_group.get("printed", {}).get("busbw_gbps") if peak_group else None,
                "peak_size_bytes": peak_group["size_bytes"] if peak_group else None,
                "peak_variant": peak_group["variant"] if peak_group else None,
                "tables": tables,
            }
        )
    return {
        "collectives": collectives,
        "ceiling_gbps": assumptions.ceiling_gbps,
        "average_convention": (
            "mean of the busbw of every size, out-of-place and in-place together, as nccl-tests' "
            "'# Avg bus bandwidth' line (src/common.cu); we average the printed two-decimal cells, so we "
            f"agree with the file's line to ±{CELL_HALF_UNIT_GBPS} GB/s"
        ),
    }


def _trials(group: dict) -> dict:
    """The slowest trials of a group (index, time, × its p50) and whether its first iteration stands out."""
    p50 = group["p50_us"]
    first = group.get("first")
    warm_up = (
        first is not None
        and group["count"] > 2
        and first["duration_us"] > group["p99_us"] * (1 - 1e-12)
        and first["duration_us"] > WARM_UP_OVER_P50 * p50
    )
    return {
        "label": group["label"],
        "slowest": [
            {**trial, "over_p50": trial["duration_us"] / p50 if p50 > 0 else None}
            for trial in group["slowest"][:SLOWEST_SHOWN]
        ],
        "first": first,
        "warm_up_flag": warm_up,
    }
