"""The summary step shared by an import and a run summarised again: a parsed table's statistics
(``results.analysis.stats.summarise``) and its Parquet blobs, computed side by side, checked finite."""

import io
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
from sqlmodel import Session

from emuplan.results.analysis.stats import NetworkModel, collectives_in, non_finite_figure, summarise
from emuplan.results.canonical import ParsedResult, ResultFileError
from emuplan.results.streaming.streamed import (
    parquet_write_options,
)

# Registers the listener that stores a run's series figures with its summary.
from emuplan.services import series_figures  # noqa: F401
from emuplan.store.plans import plan_document
from emuplan.store.runs import RunInputError, set_listed_figures
from emuplan.store.tables import (
    Plan,
    Run,
)


def _parquet_bytes(table: pa.Table) -> bytes:
    """The table as Parquet (``streamed.parquet_write_options``: each column in the encoding made for it)."""
    sink = io.BytesIO()
    pq.write_table(table, sink, **parquet_write_options(table.schema))
    return sink.getvalue()


def network_of(session: Session, plan_id: int | None) -> NetworkModel | None:
    if plan_id is None:
        return None
    plan = session.get(Plan, plan_id)
    if plan is None:
        raise RunInputError(f"plan_id: no plan with id {plan_id}")
    return NetworkModel.from_plan(plan_document(plan))


def summarised_and_encoded(
    parsed: ParsedResult, tables: dict[str, pa.Table], network: NetworkModel | None, where: str
) -> tuple[dict, dict[str, bytes]]:
    """The run's summary (``results.analysis.stats.summarise``) and ``tables`` as Parquet blobs."""
    # Parquet encoding (Arrow's C++, GIL released) runs on the second core while the statistics are computed.
    with ThreadPoolExecutor(max_workers=1) as pool:
        blobs = {kind: pool.submit(_parquet_bytes, table) for kind, table in tables.items()}
        summary = summarise(
            parsed.samples,
            ranks=parsed.ranks,
            network=network,
            flows=parsed.flows,
            reported_avg_busbw=parsed.reported_avg_busbw,
            elements=parsed.elements,
            printed=parsed.printed,
            wrong=parsed.wrong,
            rank_times=parsed.rank_times,
            rank_unit=parsed.rank_unit,
            rank_basis=parsed.rank_basis,
        )
        encoded = {kind: blob.result() for kind, blob in blobs.items()}
    if parsed.observed is not None:
        summary["observed"] = parsed.observed
    check_finite(summary, where)
    return summary, encoded


def check_finite(summary: dict, where: str) -> None:
    out_of_range = non_finite_figure(summary)
    if out_of_range is not None:
        raise ResultFileError(f"{where}: the figure {out_of_range} comes out infinite or not a number")


def store_listed_figures(session: Session, run: Run, summary: dict) -> None:
    """The collectives and sizes of ``summary`` where the runs list reads them (``store.runs.set_listed_figures``)."""
    sizes = [group["size_bytes"] for group in summary["groups"] if group.get("size_bytes") is not None]
    set_listed_figures(session, run, collectives_in(summary), sizes)
