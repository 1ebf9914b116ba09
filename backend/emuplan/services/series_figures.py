"""A run's series figures (``run_trend_figures``): per collective of a size sweep its peak and average busbw and
its busbw per size, kept beside its summary so that a series reads a few small rows rather than every summary.

Importing this module registers the listener that writes them whenever a summary is stored or computed again
(``services.summaries`` imports it: every import and relabel goes through there), in the same transaction.
"""

import sqlalchemy as sa
from sqlalchemy import event

from emuplan.results.analysis.run_analysis import analyse, resolve_assumptions, run_kind
from emuplan.store.tables import CachedSummary, Run, RunTrendFigures

# busbw depends on the ranks alone; the link and α an analysis needs move only % of ideal, which a series
# does not read, so any will do.
_ANY_LINK_GBPS = 100.0


def figures_of(summary: dict, ranks: int | None) -> dict:
    """Per collective of a size sweep, its headline and busbw per size as the run page computes them
    (``analyse``, ranks from the file): the JSON ``run_trend_figures`` keeps. Empty for a run that is no sweep."""
    kind = run_kind(summary["groups"])
    if kind != "size-sweep":
        return {}
    assumptions = resolve_assumptions(file_ranks=ranks, default_link_gbps=_ANY_LINK_GBPS, default_latency_us=0.0)
    analysis = analyse(summary, kind, assumptions)
    return {
        entry["collective"]: {
            "peak_busbw_gbps": entry["peak_busbw_gbps"],
            "average_busbw_gbps": entry["average_busbw_gbps"],
            # JSON keys are text: the size in bytes.
            "busbw_by_size": {str(row["size_bytes"]): row["busbw_gbps"] for row in entry["tables"][0]["rows"]},
        }
        for entry in analysis["sweep"]["collectives"]
    }


@event.listens_for(CachedSummary, "after_insert")
@event.listens_for(CachedSummary, "after_update")
def _store_figures(_mapper, connection, summary: CachedSummary) -> None:
    """A run's series figures follow its summary (imported, relabelled) in the same transaction."""
    ranks = connection.execute(sa.select(Run.ranks).where(Run.id == summary.run_id)).scalar_one()
    table = RunTrendFigures.__table__
    connection.execute(sa.delete(table).where(table.c.run_id == summary.run_id))
    connection.execute(sa.insert(table).values(run_id=summary.run_id, figures=figures_of(summary.summary, ranks)))
