"""``emuplan trend``: a platform's series over time — what changed since the previous run, then each figure per
run with its noise band and status; the same store call and JSON as ``GET /api/trend``."""

import json
from typing import Annotated

import typer

from emuplan.cli.app import app, in_store, remote_server
from emuplan.cli.layout import Column, WideOption, set_wide, table, wrap
from emuplan.wording import MISSING, change, gbps


def _series(platform: str, collective: str | None, tag: str | None, ranks: int | None, sizes: str | None,
            limit: int) -> dict:  # fmt: skip
    """The series from --server's API, else from the local database (a bad option exits 2 with its message)."""
    server = remote_server()
    query = {"platform": platform, "collective": collective, "tag": tag, "ranks": ranks, "sizes": sizes}
    if server is not None:
        given = {key: value for key, value in query.items() if value is not None}
        return server.get("/api/trend", given | {"limit": limit})
    from pydantic_core import to_jsonable_python

    from emuplan.services import trend as trend_service

    series = in_store(
        lambda session: trend_service.trend(
            session, platform, collective=collective, tag=tag, ranks=ranks,
            sizes=trend_service.sizes_from_text(sizes), limit=limit,
        )
    )  # fmt: skip
    # As the API answers it: times in ISO 8601.
    return to_jsonable_python(series)


@app.command()
def trend(
    platform: Annotated[str, typer.Option(help="The platform whose runs make the series (emuplan platforms list).")],
    collective: Annotated[str | None, typer.Option(help="Default: the newest run's first collective.")] = None,
    tag: Annotated[str | None, typer.Option(help="Only runs with this tag (any case).")] = None,
    ranks: Annotated[int | None, typer.Option(min=1, help="Only runs of this many ranks.")] = None,
    sizes: Annotated[
        str | None, typer.Option(help="busbw at these sizes, bytes, comma-separated (default: the largest 3 shared).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=200, help="The newest runs read.")] = 30,
    as_json: Annotated[bool, typer.Option("--json", help="Print the API's JSON document.")] = False,
    wide: WideOption = False,
) -> None:
    """What changed since the previous run of a platform's series, regressions first, then each figure over the
    runs (oldest first) against the noise band of the up to 7 runs before it (median ± 3 robust σ, ≥ ±5 %)."""
    from emuplan.results.analysis.trend import figure_label

    set_wide(wide)
    series = _series(platform, collective, tag, ranks, sizes, limit)
    if as_json:
        typer.echo(json.dumps(series, indent=2))
        return
    changed = series["what_changed"]
    lines = wrap(f"{series['platform']} · {series['collective'] or 'no collective'}: {len(series['runs'])} runs")
    lines += wrap(changed["summary"])
    if changed["changes"]:
        columns = [
            Column("figure"),
            Column("now GB/s", numeric=True),
            Column("Δ prev. %", numeric=True),
            Column("Δ median %", numeric=True, optional=True),
            Column("status"),
        ]
        rows = [
            [entry["label"], gbps(entry["value"]), change(entry["change_since_previous_pct"]),
             change(entry["change_from_median_pct"]), entry["status"]]
            for entry in changed["changes"]
        ]  # fmt: skip
        lines += ["", "What changed since the previous run", *table(columns, rows, indent="")]
    for name, entries in series["figures"].items():
        columns = [
            Column("run"),
            Column("measured (UTC)", optional=True),
            Column("GB/s", numeric=True),
            Column("band GB/s", numeric=True, optional=True),
            Column("Δ median %", numeric=True),
            Column("status"),
        ]
        rows = [
            [f"#{entry['run_id']} {entry['name']}", entry["measured_at"][:16].replace("T", " "), gbps(entry["value"]),
             MISSING if entry["low"] is None else f"{gbps(entry['low'])}–{gbps(entry['high'])}",
             change(entry["change_pct"]), entry["status"]]
            for entry in entries
        ]  # fmt: skip
        lines += ["", figure_label(name), *table(columns, rows, indent="")]
    typer.echo("\n".join(lines))
