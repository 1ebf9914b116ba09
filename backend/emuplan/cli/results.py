"""``emuplan import``, ``runs``, ``stats``, ``compare``, ``observed``, ``export-kccb``: the runs API on the
command line (same store calls, same JSON with ``--json``)."""

import json
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from emuplan.cli.app import app, fail, in_store, remote_server
from emuplan.cli.layout import Column, WideOption, set_wide, table, wrap
from emuplan.cli.relabel_progress import summarised_locally, waited_for_server
from emuplan.results.formats import FORMATS
from emuplan.results.run_fields import RUN_FIELDS
from emuplan.wording import (
    against_median,
    as_printed,
    gbps,
    ks_statistic,
    p_value,
    percent,
    plural,
    ratio,
    size_range,
    time_in,
)
from emuplan.workload.collectives import CollectiveOp
from emuplan.workload.plan_options import EXPORT_FORMATS

if TYPE_CHECKING:
    from sqlmodel import Session

T = TypeVar("T")
# The API's largest page (store.runs.MAX_RUNS_PER_PAGE; the store is not imported for a remote listing).
REMOTE_RUNS_PER_REQUEST = 1000


def _echo_json(document) -> None:
    typer.echo(json.dumps(document, indent=2, default=str))


def _with_store(action: Callable[["Session"], T], *, write: bool = False) -> T:
    """``in_store`` (RunNotFound, ResultFileError, RunInputError, bad options exit 2), saying of a duplicate
    upload that it was not imported again."""
    from emuplan.services.imports import DuplicateRun

    def guarded(session: "Session") -> T:
        try:
            return action(session)
        except DuplicateRun as duplicate:
            fail(f"{duplicate} — not imported again")

    return in_store(guarded, write=write)


def _ratio(value: float | None) -> str:
    """run ÷ baseline, as the compare page prints it (0.000650×, not ×0.00)."""
    return ratio(value) + ("×" if value is not None else "")


def _busbw(group: dict) -> str:
    """A group's busbw: the cell the log printed, as printed; else ours (as on the run and compare pages)."""
    from emuplan.results.analysis.run_analysis import file_or_ours

    printed = (group.get("printed") or {}).get("busbw_gbps")
    value = file_or_ours(group, "busbw_gbps")
    return as_printed(value, printed) if group.get("reported_busbw_gbps") is not None else gbps(value)


def _time(value_us: float | None, printed: dict | None) -> str:
    """A time in µs; a group timed once that nccl-tests printed shows the log's cell (its p50 is that cell)."""
    cell = (printed or {}).get("time_us")
    return as_printed(value_us, cell, "time_us") if cell else time_in(value_us)


def _statistics_lines(summary: dict) -> list[str]:
    """Per group: count, p50, p99, max, p99/p50, busbw, % of ideal (max and p99/p50 left out first to fit)."""
    columns = [
        Column("group"),
        Column("n", numeric=True),
        Column("p50 µs", numeric=True),
        Column("p99 µs", numeric=True),
        Column("max µs", numeric=True, optional=True),
        Column("p99/p50", numeric=True, optional=True),
        Column("busbw GB/s", numeric=True),
        Column("% ideal", numeric=True),
    ]
    rows = []
    for group in summary.get("groups", []):
        printed = group.get("printed")
        rows.append(
            [
                group["label"],
                str(group["count"]),
                _time(group["p50_us"], printed),
                _time(group["p99_us"], printed),
                _time(group["max_us"], printed),
                ratio(group["p99_over_p50"]),
                _busbw(group),
                percent(group.get("pct_of_ideal")),
            ]
        )
    if "flows" in summary:
        flows = summary["flows"]
        rows.append(
            ["flow completion (per flow)", str(flows["count"]), time_in(flows["p50_us"]), time_in(flows["p99_us"]),
             time_in(flows["max_us"]), "", "", ""]
        )  # fmt: skip
    return table(columns, rows)


CollectiveOption = Annotated[
    CollectiveOp | None,
    typer.Option(
        help="The collective when the file does not say it (an nccl-tests log's own test and cells come first). "
        f"One of: {', '.join(CollectiveOp)}.",
        metavar="COLLECTIVE",
    ),
]


MeasuredAtOption = Annotated[
    datetime | None,
    typer.Option(
        "--measured-at",
        help=RUN_FIELDS["measured_at"].described(),
        formats=["%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%dT%H:%M%z", "%Y-%m-%d %H:%M:%S%z", "%Y-%m-%d %H:%M%z"],
    ),
]
FactOption = Annotated[
    list[str] | None,
    typer.Option("--fact", help=RUN_FIELDS["facts"].described("One as key=value; repeat for several.")),
]


def _import_file(
    session, file: Path, name, plan, strategy, tags, fmt, collective, column_map, platform, facts, measured_at
):
    """The stored run (``services.imports.import_result_file`` with the CLI's options), in the import budget."""
    from emuplan.results.budget import ImportBudget, ImportLimits
    from emuplan.results.formats.headers import parse_column_map
    from emuplan.services import imports as run_imports
    from emuplan.services import runs as run_service
    from emuplan.settings import get_settings

    with ImportBudget(ImportLimits.from_settings(get_settings())) as budget:
        return run_imports.import_result_file(
            session,
            file,
            file.name,
            name=name,
            plan_id=plan,
            strategy=strategy,
            tags=tags or (),
            fmt=fmt,
            column_map=parse_column_map(column_map),
            collective=collective,
            platform=platform,
            budget=budget,
            facts=run_service.facts_from_lines(facts or ()),
            measured_at=measured_at,
        )


def _import_job(
    session, files: list[Path], name, plan, strategy, tags, fmt, collective, column_map, platform, facts, measured_at
):
    """One training job's records (an NCCL Inspector dump per process, a profiler trace per rank) as one observed
    run (``run_imports.import_observed_files``), within the settings' import budget. The strategy, collective and
    column mapping are the records' own."""
    from emuplan.results.budget import ImportBudget, ImportLimits
    from emuplan.services import imports as run_imports
    from emuplan.services import runs as run_service
    from emuplan.settings import get_settings

    with ImportBudget(ImportLimits.from_settings(get_settings())) as budget:
        return run_imports.import_observed_files(
            session,
            files,
            name=name,
            plan_id=plan,
            tags=tags or (),
            fmt=fmt,
            budget=budget,
            platform=platform,
            facts=run_service.facts_from_lines(facts or ()),
            measured_at=measured_at,
        )


def _imported_with_statistics(session, files: list[Path], *options) -> tuple[dict, dict]:
    """The stored run (several files: one job's) and its statistics (its headline and verdict end the output)."""
    from emuplan.services import runs as run_service
    from emuplan.settings import get_settings
    from emuplan.store import runs as run_rows

    run = _import_job(session, files, *options) if len(files) > 1 else _import_file(session, files[0], *options)
    return run_rows.run_public(run), run_service.run_statistics(
        session, run, run_service.AssumptionChoice(), get_settings()
    )


def _statistics_of(run_ids: list[int]) -> list[dict]:
    """The statistics of stored runs as ``emuplan stats`` reads them: from --server's API, else the database."""
    server = remote_server()
    if server is not None:
        return [server.get(f"/api/runs/{run_id}/stats", {}) for run_id in run_ids]
    from emuplan.services import runs as run_service
    from emuplan.settings import get_settings
    from emuplan.store import runs as run_rows

    def judged(session) -> list[dict]:
        return [
            run_service.run_statistics(
                session, run_rows.get_run(session, run_id), run_service.AssumptionChoice(), get_settings()
            )
            for run_id in run_ids
        ]

    return _with_store(judged)


def _headline_lines(statistics: dict) -> list[str]:
    """What a run comes to in a line: a sweep's peak and average busbw per collective, a distribution's p50 and
    p99 over its samples."""
    if statistics["kind"] == "size-sweep":
        return _sweep_lines(statistics["sweep"])
    overall = statistics["overall"]
    return wrap(
        f"  p50 {time_in(overall['p50_us'])} µs, p99 {time_in(overall['p99_us'])} µs over "
        f"{plural(overall['count'], 'sample')}",
        hanging="    ",
    )


def expand_paths(arguments: list[str]) -> tuple[list[Path], list[dict]]:
    """The files the arguments name (a path, or a glob pattern the shell left alone: 'logs/*.txt'), each once in
    the order given, and an outcome for each argument that names none."""
    import glob

    files: dict[Path, None] = {}
    unmatched = []
    for argument in arguments:
        path = Path(argument)
        if path.is_file():
            files[path] = None
        elif glob.has_magic(argument):
            matches = sorted(Path(match) for match in glob.glob(argument, recursive=True) if Path(match).is_file())
            files.update(dict.fromkeys(matches))
            if not matches:
                unmatched.append({"file": argument, "outcome": "refused", "run_id": None, "detail": "no file matches"})
        else:
            detail = "a directory: give the files in it, e.g. 'dir/*.txt'" if path.is_dir() else "no such file"
            unmatched.append({"file": argument, "outcome": "refused", "run_id": None, "detail": detail})
    return list(files), unmatched


def _import_each(files: list[Path], fields: dict, options: tuple, progress: bool) -> list[dict]:
    """Each file imported on its own (its own transaction or request): one refused never stops the rest. An
    outcome per file: stored (as run_id), duplicate (of run_id) or refused (detail)."""
    server = remote_server()
    outcomes = []
    if server is not None:
        from emuplan.cli.remote import Refused

        for file in files:
            try:
                document = server.upload("/api/runs", [file], fields, raise_refusal=True, progress=progress)
                outcomes.append({"file": str(file), "outcome": "stored", "run_id": document["id"], "detail": None})
            except Refused as refused:
                existing = refused.answer.get("existing_run_id") if isinstance(refused.answer, dict) else None
                outcome = "duplicate" if existing is not None else "refused"
                outcomes.append({"file": str(file), "outcome": outcome, "run_id": existing, "detail": str(refused)})
        return outcomes
    from emuplan.cli.app import open_database
    from emuplan.services.imports import DuplicateRun

    database = open_database()
    try:
        for file in files:
            try:
                with database.writing() as session:
                    run_id = _import_file(session, file, *options).id
                outcomes.append({"file": str(file), "outcome": "stored", "run_id": run_id, "detail": None})
            except DuplicateRun as duplicate:
                outcomes.append(
                    {
                        "file": str(file),
                        "outcome": "duplicate",
                        "run_id": duplicate.existing_run_id,
                        "detail": str(duplicate),
                    }
                )
            except (LookupError, ValueError, OSError) as error:
                outcomes.append({"file": str(file), "outcome": "refused", "run_id": None, "detail": str(error)})
    finally:
        database.dispose()
    return outcomes


def outcome_line(outcome: dict) -> str:
    if outcome["outcome"] == "stored":
        return f"{outcome['file']}: stored as run #{outcome['run_id']}"
    if outcome["outcome"] == "duplicate":
        return f"{outcome['file']}: duplicate of run #{outcome['run_id']} (not imported again)"
    return f"{outcome['file']}: refused: {outcome['detail']}"


@app.command("import")
def import_run(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Result files: paths, or glob patterns quoted so that the shell leaves them ('logs/*.txt').",
            metavar="FILE...",
        ),
    ],
    plan: Annotated[int | None, typer.Option("--plan", help=RUN_FIELDS["plan_id"].described())] = None,
    name: Annotated[
        str | None, typer.Option(help=RUN_FIELDS["name"].described("Default: the file name; one file only."))
    ] = None,
    strategy: Annotated[str | None, typer.Option(help="data | tensor | pipeline | hybrid")] = None,
    tag: Annotated[
        list[str] | None, typer.Option("--tag", help=RUN_FIELDS["tags"].described("Repeat for several."))
    ] = None,
    fmt: Annotated[str | None, typer.Option("--format", help=f"Skip detection. One of: {', '.join(FORMATS)}.")] = None,
    collective: CollectiveOption = None,
    column_map: Annotated[
        str | None, typer.Option("--column-map", help='Role → column: JSON or "duration=wall_ms,size=payload".')
    ] = None,
    platform: Annotated[str | None, typer.Option(help=RUN_FIELDS["platform"].described())] = None,
    fact: FactOption = None,
    measured_at: MeasuredAtOption = None,
    job: Annotated[
        bool,
        typer.Option(
            "--job",
            help="The files are one training job's records (an NCCL Inspector dump per process, a PyTorch "
            "profiler trace per rank): one observed run.",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the stored run (several: each outcome) as JSON.")
    ] = False,
    progress: Annotated[
        bool,
        typer.Option(
            "--progress", help="With --server: the upload's progress on stderr even when it is not a terminal."
        ),
    ] = False,
    wide: WideOption = False,
) -> None:
    """Import result files as runs. One file (or --job): its statistics are printed. Several (or a glob): a line
    per file, stored as #id, duplicate of #id or refused with the reason; a file refused never stops the others,
    and the exit status is 2 when any file was not stored."""
    set_wide(wide)
    files, unmatched = expand_paths(paths)
    fields = {"name": name, "plan_id": plan, "strategy": strategy, "format": fmt, "collective": collective}
    fields |= {"tags": ",".join(tag) if tag else None, "column_map": column_map, "platform": platform}
    fields["facts"] = "\n".join(fact) if fact else None
    fields["measured_at"] = None if measured_at is None else measured_at.isoformat()
    options = (name, plan, strategy, tag, fmt, collective, column_map, platform, fact, measured_at)
    if job and unmatched:
        fail(f"{unmatched[0]['file']}: {unmatched[0]['detail']}")
    if job or (len(files) == 1 and not unmatched and len(paths) == 1):
        _import_one(files, fields | {"job": job or None}, options, as_json, progress)
        return
    if name is not None and len(files) + len(unmatched) > 1:
        fail("--name names one run: with several files each is named by its file name")
    outcomes = unmatched + _import_each(files, fields, options, progress)
    if as_json:
        _echo_json(outcomes)
    else:
        for outcome in outcomes:
            typer.echo("\n".join(wrap(outcome_line(outcome))))
        counts = {kind: sum(o["outcome"] == kind for o in outcomes) for kind in ("stored", "duplicate", "refused")}
        typer.echo(
            f"{plural(len(outcomes), 'file')}: " + ", ".join(f"{count} {kind}" for kind, count in counts.items())
        )
        stored = [outcome["run_id"] for outcome in outcomes if outcome["outcome"] == "stored"]
        for statistics in _statistics_of(stored):
            typer.echo("\n".join(wrap(f"run {statistics['run_id']} {statistics['name']}:")))
            typer.echo("\n".join(_headline_lines(statistics) + _verdict_lines(statistics, indent="  ")))
    if any(outcome["outcome"] != "stored" for outcome in outcomes):
        raise typer.Exit(2)


def _import_one(files: list[Path], fields: dict, options: tuple, as_json: bool, progress: bool) -> None:
    """One run (one file, or one job's files: one upload), as ``emuplan import`` always printed it: the run and
    its statistics; refused: exit 2."""
    server = remote_server()
    if server is not None:
        document = server.upload("/api/runs", files, fields, progress=progress)
        statistics = server.get(f"/api/runs/{document['id']}/stats")
    else:
        document, statistics = _with_store(
            lambda session: _imported_with_statistics(session, files, *options), write=True
        )
    if as_json:
        _echo_json(document)
        return
    heading = (
        f"run {document['id']}: {document['name']} ({document['source_format']}, {document['sample_count']} samples"
        + (f", {plural(document['ranks'], 'rank')}" if document["ranks"] else "")
        + (f" on {plural(document['hosts'], 'host')}" if document["hosts"] else "")
        + ")"
    )
    lines = wrap(heading)
    for warning in document["warnings"]:
        lines += wrap(f"  note: {warning}", hanging="    ")
    sweep = statistics["kind"] == "size-sweep"
    lines += _sweep_table_lines(statistics) if sweep else _statistics_lines(document["summary"])
    # The answer last, where the terminal leaves the eye: the headline and the verdict with its reasons.
    lines += ["headline:", *_headline_lines(statistics), *_verdict_lines(statistics)]
    typer.echo("\n".join(lines))


def relabelling(run: dict, new: str, old: str | None) -> dict[str, str]:
    """``{old: new}`` for ``emuplan relabel`` from the run's document: ``old`` may be left out when the run
    has one collective."""
    if old is None:
        from emuplan.results.analysis.stats import collectives_in

        collectives = collectives_in(run["summary"])
        if len(collectives) != 1:
            fail(
                f"run {run['id']} has {len(collectives)} collectives ({', '.join(collectives)}): say which with --from"
            )
        old = collectives[0]
    return {old: new}


def _relabel_stored(run_id: int, new: str, old: str | None) -> dict:
    """On the local database: a huge run summarised again with its progress printed (``relabel_progress``), any
    other in one transaction."""
    from emuplan.results.budget import ImportLimits
    from emuplan.services import runs as run_service
    from emuplan.settings import get_settings
    from emuplan.store import runs as run_rows

    def document(session) -> dict:
        return run_rows.run_public(run_rows.get_run(session, run_id))

    mapping = relabelling(_with_store(document), new, old)
    if summarised_locally(run_id, mapping):
        return _with_store(document)
    limits = ImportLimits.from_settings(get_settings())
    return _with_store(
        lambda session: run_rows.run_public(run_service.relabel_collectives(session, run_id, mapping, limits)),
        write=True,
    )


@app.command("relabel")
def relabel_run(
    run_id: Annotated[int, typer.Argument(help="Run id.")],
    collective: Annotated[
        CollectiveOp,
        typer.Option(help=f"The collective it really is. One of: {', '.join(CollectiveOp)}.", metavar="COLLECTIVE"),
    ],
    old: Annotated[
        str | None, typer.Option("--from", help="The collective to rename (default: the run's only one).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the changed run as JSON.")] = False,
) -> None:
    """Set a run's collective after import (e.g. 'unknown' → all_reduce); its statistics are computed again
    (the same change as PATCH /api/runs/{id}). A huge run's take a minute or more: their progress is printed on
    stderr meanwhile (through a server, Ctrl-C cancels and leaves the run as it was)."""
    server = remote_server()
    if server is not None:
        mapping = relabelling(server.get(f"/api/runs/{run_id}"), collective, old)
        document = waited_for_server(server, run_id, server.patch(f"/api/runs/{run_id}", {"collectives": mapping}))
    else:
        document = _relabel_stored(run_id, collective, old)
    if as_json:
        _echo_json(document)
        return
    typer.echo(f"run {document['id']}: {document['name']}: {document['warnings'][-1]}")
    typer.echo("\n".join(_statistics_lines(document["summary"])))


runs_app = typer.Typer(
    help="List stored runs (filters, sort); edit or delete one: emuplan runs edit|delete RUN_ID.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(runs_app, name="runs")
RUN_SORTS = ("newest", "oldest", "name", "p50", "busbw", "ranks", "size")  # store.runs.RUN_SORTS


@runs_app.callback()
def list_runs(
    context: typer.Context,
    strategy: Annotated[str | None, typer.Option(help="Only runs of this strategy (any case).")] = None,
    plan: Annotated[int | None, typer.Option("--plan", help="Only runs linked to this plan.")] = None,
    tag: Annotated[str | None, typer.Option(help="Only runs with this tag (any case).")] = None,
    collective: Annotated[str | None, typer.Option(help="Only runs of this collective.")] = None,
    platform: Annotated[str | None, typer.Option(help="Only runs on this platform (its name).")] = None,
    verdict: Annotated[str | None, typer.Option(help="pass | degraded | fail | 'not judged'")] = None,
    kind: Annotated[str | None, typer.Option(help="size-sweep | distribution")] = None,
    ranks: Annotated[int | None, typer.Option(help="Only runs of this many ranks.")] = None,
    hosts: Annotated[int | None, typer.Option(help="Only runs on this many hosts.")] = None,
    size: Annotated[int | None, typer.Option(help="Only runs whose sizes span this one (bytes).")] = None,
    fact: Annotated[str | None, typer.Option(help="key=value (any case), or a key the run states at all.")] = None,
    search: Annotated[str | None, typer.Option("--search", help="A part of the name (any case).")] = None,
    sort: Annotated[str, typer.Option(help=f"One of: {', '.join(RUN_SORTS)}.")] = "newest",
    wide: Annotated[bool, typer.Option("--wide", help="One line per run, however long its name.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List stored runs (newest first unless --sort): whole names, wrapped to the terminal unless --wide."""
    if context.invoked_subcommand is not None:
        return
    from rich.console import Console
    from rich.table import Table

    filters = {"strategy": strategy, "tag": tag, "collective": collective, "platform": platform, "verdict": verdict}
    filters |= {"kind": kind, "ranks": ranks, "hosts": hosts, "size": size, "fact": fact}
    server = remote_server()
    if server is not None:
        query = {**filters, "plan": plan, "q": search, "sort": sort}
        documents = list(server.pages("/api/runs", query, page_size=REMOTE_RUNS_PER_REQUEST))
    else:
        from emuplan.store import runs as run_rows

        chosen = run_rows.RunFilters(**filters, plan_id=plan, text=search)
        documents = _with_store(
            lambda session: [run.document() for run in run_rows.list_runs(session, chosen, sort=sort)]
        )
    if as_json:
        _echo_json(documents)
        return
    console = Console(width=sys.maxsize if wide else None, highlight=False)
    # Nine columns need 120 characters beside a name; a narrower terminal gets each run as its whole name over
    # its figures (a name folded into what the other columns leave was three characters wide at 80).
    if not (wide or console.width >= 120):
        console.print(_runs_stacked(documents))
        return
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("id", justify="right")
    table.add_column("name", overflow="fold", no_wrap=wide, ratio=1)
    table.add_column("collective", no_wrap=True)
    table.add_column("sizes", justify="right", no_wrap=True)
    table.add_column("ranks×hosts", justify="right", no_wrap=True)
    # A sweep is headlined by its peak busbw (its p50 would pool one value per size), a distribution by its p50.
    table.add_column("peak busbw | p50", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("platform", no_wrap=True)
    table.add_column("tags", overflow="fold")
    for document in documents:
        table.add_row(str(document["id"]), document["name"], *_listed_figures(document))
    # --wide: as wide as the longest line, for grep and for terminals that scroll sideways.
    console.print(table)


def _listed_figures(listed: dict) -> list[str]:
    """What the runs list shows of a run after its name: collectives, sizes, ranks × hosts, headline, verdict,
    platform, tags."""
    return [
        ", ".join(listed["collectives"]) or "–",
        size_range(listed["size_min_bytes"], listed["size_max_bytes"]),
        f"{listed['ranks'] or '–'}" + (f"×{listed['hosts']}" if listed["hosts"] else ""),
        _headline(listed),
        listed["verdict"] or "–",
        listed["platform"] or "–",
        ", ".join(listed["tags"]) or "–",
    ]


def _runs_stacked(documents: list[dict]):
    """The runs list for a narrow terminal: per run its id and whole name, under it its figures in the wide
    table's order, separated by " · " and wrapped under the name."""
    from rich.table import Table

    # The header as a first row: a header cell of two lines sits at the bottom, beside an "id" a line below.
    table = Table(box=None, pad_edge=False, show_header=False)
    table.add_column("id", justify="right")
    table.add_column("run", overflow="fold")
    table.add_row("id", "name\ncollective · sizes · ranks×hosts · headline · verdict · platform · tags", style="bold")
    for document in documents:
        table.add_row(str(document["id"]), document["name"] + "\n" + " · ".join(_listed_figures(document)))
    return table


def _headline(listed: dict) -> str:
    """What a list shows of a run, saying which figure it is: a sweep's peak busbw, a distribution's p50."""
    if listed["kind"] == "size-sweep":
        return f"peak {gbps(listed['peak_busbw_gbps'])} GB/s"
    return f"p50 {time_in(listed['p50_us'])} µs"


LinkOption = Annotated[
    float | None, typer.Option("--link-gbps", min=0.001, help="Link Gbit/s per rank (default: plan, settings).")
]
LatencyOption = Annotated[
    float | None, typer.Option("--latency-us", min=0, help="Latency α in µs (default: plan, settings).")
]
RanksOption = Annotated[int | None, typer.Option("--ranks", min=1, help="Ranks (default: plan, the file).")]
PlanOption = Annotated[
    int | None,
    typer.Option("--plan", min=0, help="Read the run with this plan: its training step's cost (default: linked)."),
]


def _verdict_lines(statistics: dict, heading: str = "verdict: ", indent: str = "") -> list[str]:
    """The verdict as the run page shows it: status (pass, degraded, fail, not judged…), platform, then each
    reason in the verdict's order, its severity before its message where it has one."""
    verdict, platform = statistics["verdict"], statistics["platform"]
    where = f"on {platform['title']} ({platform['name']})" if platform else "(no platform)"
    lines = wrap(f"{indent}{heading}{verdict['status']} {where}")
    for reason in verdict["reasons"]:
        severity = f"{reason['severity']}: " if reason.get("severity") else ""
        lines += wrap(f"{indent}  {severity}{reason['message']}", hanging=f"{indent}    ")
    return lines


@app.command("check")
def check_runs(
    run_ids: Annotated[list[int], typer.Argument(help="Run ids.")],
    strict: Annotated[bool, typer.Option(help="Fail on a degraded run too, not only a failing one.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Each run's verdict as the API states it.")] = False,
    wide: WideOption = False,
) -> None:
    """Each run's verdict (pass, degraded, fail, not judged) with its reasons; exits 1 when a run fails (with
    --strict, when one is degraded too), so a nightly script can gate on it. A run not judged (no platform)
    exits 0 and says what is missing."""
    set_wide(wide)
    documents = _statistics_of(run_ids)
    verdicts = [
        {"run_id": d["run_id"], "name": d["name"], "platform": d["platform"], **d["verdict"]} for d in documents
    ]
    if as_json:
        _echo_json(verdicts)
    else:
        for document in documents:
            heading = f"run {document['run_id']} {document['name']}: "
            typer.echo("\n".join(_verdict_lines(document, heading=heading)))
    failing = {"fail", "degraded"} if strict else {"fail"}
    if any(verdict["status"] in failing for verdict in verdicts):
        raise typer.Exit(1)


@app.command("stats")
def run_stats(
    run_id: Annotated[int, typer.Argument(help="Run id.")],
    link_gbps: LinkOption = None,
    latency_us: LatencyOption = None,
    ranks: RanksOption = None,
    plan: PlanOption = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    wide: WideOption = False,
) -> None:
    """Statistics of one run per data size / collective, and what a training step of its plan costs on it
    (the same numbers as GET /api/runs/{id}/stats)."""
    set_wide(wide)
    server = remote_server()
    if server is not None:
        assumptions = {"link_gbps": link_gbps, "latency_us": latency_us, "ranks": ranks, "plan": plan}
        document = server.get(f"/api/runs/{run_id}/stats", assumptions)
    else:
        from emuplan.services import runs as run_service
        from emuplan.settings import get_settings
        from emuplan.store import runs as run_rows

        choice = run_service.AssumptionChoice(link_gbps=link_gbps, latency_us=latency_us, ranks=ranks)
        document = _with_store(
            lambda session: run_service.run_statistics(
                session, run_rows.get_run(session, run_id), choice, get_settings(), plan_id=plan
            )
        )
    if as_json:
        _echo_json(document)
        return
    typer.echo("\n".join(wrap(f"run {document['run_id']}: {document['name']} ({document['source_format']})")))
    typer.echo("\n".join(_verdict_lines(document)))
    typer.echo("\n".join(wrap(_assumptions_line(document["assumptions"]))))
    if document["above_ideal_warning"]:
        typer.echo("\n".join(wrap(_above_ideal_line(document["above_ideal_warning"]))))
    if document["kind"] == "size-sweep":
        typer.echo("\n".join(_sweep_lines(document["sweep"]) + _sweep_table_lines(document)))
    else:
        typer.echo("\n".join(_statistics_lines(document)))
    typer.echo("\n".join(_step_cost_lines(document["step_cost"])))
    if document.get("stragglers"):
        typer.echo("\n".join(_straggler_lines(document["stragglers"])))


@app.command("observed")
def observed_against_plan(
    run_id: Annotated[int, typer.Argument(help="An observed run's id (NCCL Inspector dump, profiler traces).")],
    plan: Annotated[
        int | None, typer.Option("--plan", min=0, help="The plan to hold it against (default: linked).")
    ] = None,
    steps: Annotated[
        int | None, typer.Option(min=1, help="Steps the records span (default: the trace's ProfilerStep marks).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """What a training job sent per step against what its plan predicted (GET /api/runs/{id}/observed-vs-plan)."""
    server = remote_server()
    if server is not None:
        document = server.get(f"/api/runs/{run_id}/observed-vs-plan", {"plan": plan, "steps": steps})
    else:
        from emuplan.services import runs as run_service
        from emuplan.store import runs as run_rows

        document = _with_store(
            lambda session: run_service.observed_against_plan(session, run_rows.get_run(session, run_id), plan, steps)
        )
    if as_json:
        _echo_json(document)
        return
    typer.echo(
        f"run {document['run_id']} against plan {document['plan_id']} ({document['plan_name']}), "
        f"per step over {plural(document['steps'], 'step')}: {document['summary']}"
    )
    typer.echo(
        f"  {'status':<14} {'collective':<15} {'group':>5} {'planned B':>14} {'observed B':>14} "
        f"{'plan/step':>9} {'seen/step':>9}"
    )
    for row in document["rows"]:
        sizes = [
            f"{row[key]:,}" if row[key] is not None else "—" for key in ("planned_size_bytes", "observed_size_bytes")
        ]
        typer.echo(
            f"  {row['status']:<14} {row['collective']:<15} {row['group_size'] or '?':>5} {sizes[0]:>14} "
            f"{sizes[1]:>14} {row['planned_per_step']:>9g} {row['observed_per_step']:>9g}"
        )


@app.command("export-kccb")
def export_kccb(
    run_id: Annotated[int, typer.Argument(help="An observed run's id (NCCL Inspector dump, profiler traces).")],
    export_format: Annotated[str, typer.Option("--format", help=f"One of: {', '.join(EXPORT_FORMATS)}.")] = "yaml",
    steps: Annotated[
        int | None, typer.Option(min=1, help="Steps the records span (default: the trace's ProfilerStep marks).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="File to write (default: print it).")] = None,
) -> None:
    """A KCCB trial from reality: the KCCB configuration that replays what an observed run's training job sent
    (collectives, sizes, calls per step, group sizes), as a plan's export (GET /api/runs/{id}/kccb)."""
    if export_format not in EXPORT_FORMATS:
        raise typer.BadParameter(f"use one of {', '.join(EXPORT_FORMATS)}", param_hint="--format")
    from emuplan.results.analysis.observed_kccb import export_observed_kccb
    from emuplan.store import runs as run_rows

    def exported(session: "Session") -> str:
        run = run_rows.get_run(session, run_id)
        return export_observed_kccb(run.id, run.name, run.summary.get("observed"), export_format, steps)

    body = _with_store(exported)
    if out is None:
        typer.echo(body, nl=False)
        return
    out.write_text(body)
    typer.echo(f"wrote the KCCB {export_format} export of run {run_id} to {out}")


def _assumptions_line(assumptions: dict) -> str:
    sources = assumptions["sources"]
    ranks = assumptions["ranks"] if assumptions["ranks"] is not None else "unknown"
    # As the run and compare pages say it: the server's fallback link is never claimed where it is not applied.
    link = (
        f"link {assumptions['link_gbps']:g} Gbit/s per rank ({sources['link_gbps']})"
        if assumptions["link_applied"]
        else f"no link speed given (the fallback {assumptions['link_gbps']:g} Gbit/s is not applied: no % of ideal)"
    )
    return (
        f"assumed: {link}, α {assumptions['latency_us']:g} µs ({sources['latency_us']}), "
        f"ranks {ranks} ({sources['ranks']})"
    )


def _above_ideal_line(warning: str) -> str:
    """The run page's and compare page's warning, in the same words, and the options that set the link."""
    return f"note: {warning} Here: --link-gbps and --latency-us."


def _sweep_lines(sweep: dict) -> list[str]:
    """The headline nccl-tests users read first: peak and average busbw, the log's own average beside ours."""
    lines = []
    for entry in sweep["collectives"]:
        file_average = entry["file_average_busbw_gbps"]
        beside = (
            f" (log: {as_printed(file_average, None, 'avg_busbw_gbps')}, "
            f"{'agrees' if entry['agrees_with_file'] else 'DIFFERS'})"
            if file_average is not None
            else ""
        )
        lines += wrap(
            f"  {entry['collective']}: peak busbw {as_printed(entry['peak_busbw_gbps'], entry['peak_busbw_printed'])} "
            f"GB/s at {entry['peak_size_bytes']:,} B {entry['peak_variant']}; average busbw "
            f"{gbps(entry['average_busbw_gbps'])} GB/s over {entry['averaged_cells']} cells{beside}",
            hanging="    ",
        )
    return lines


def _step_time(us: float | None, cost: dict) -> str:
    return f"{time_in(us, cost['time_unit'])} {cost['time_unit']}"


def _step_cost_lines(cost: dict | None) -> list[str]:
    """What one training step of the run's plan costs on it: the step, then each planned collective."""
    if cost is None:
        return wrap("training step: no plan linked (--plan ID reads the run with one)")
    plan, step, training = cost["plan"], cost["step"], cost["training"]
    lines = [
        *wrap(
            f"training step of plan {plan['id']} {plan['name']!r} ({plan['source']}), collectives one after another:"
        ),
        *wrap(
            f"  {_step_time(step['p50_us'], cost)} per step at p50, {_step_time(step['p99_us'], cost)} with every "
            f"collective at its p99",
            hanging="    ",
        ),
        *wrap(
            f"  {plural(step['collectives_per_step'], 'collective')}, {step['bytes_per_step']:,} B per step; "
            f"training ({training['steps']:,} steps) "
            f"{time_in(None if training['p50_s'] is None else training['p50_s'] * 1e6, 's')} s at p50",
            hanging="    ",
        ),
    ]
    columns = [
        Column("collective"),
        Column("count", numeric=True),
        Column("size B", numeric=True),
        Column("per step p50", numeric=True),
        Column("time read as", optional=True),
    ]
    rows = [
        [
            f"{row['op']} {row['parallel_dim']} {row['label']}",
            str(row["count_per_step"]),
            f"{row['run_size_bytes']:,}",
            _step_time(row["step_p50_us"], cost),
            row["missing_reason"] or row["basis"],
        ]
        for row in cost["rows"]
    ]
    return lines + table(columns, rows)


def _step_cost_table(comparison: dict) -> list[str]:
    """The compare page's leading table: each run's step at p50 and p99, × the baseline's, cheapest first."""
    if not comparison["ranking"] and not any(row["step"] for row in comparison["rows"]):
        return wrap("training step: no run has a plan (--plan PLAN for every run, or RUN:PLAN, reads runs with one)")
    unit = comparison["time_unit"]

    def time(us: float | None) -> str:
        return time_in(us, unit)

    columns = [
        Column("run"),
        Column("plan", numeric=True),
        Column(f"p50 {unit}", numeric=True),
        Column("×base", numeric=True),
        Column(f"p99 {unit}", numeric=True, optional=True),
        Column("colls", numeric=True, optional=True),
        Column("bytes/step", numeric=True, optional=True),
    ]
    rows, without_plan = [], []
    for row in comparison["rows"]:
        name = f"#{row['run_id']} {row['name']}"
        if row["step"] is None:
            without_plan.append(f"  {name}: no plan: --plan {row['run_id']}:PLAN reads it with one")
            continue
        step = row["step"]
        rows.append(
            [name, str(row["plan"]["id"]), time(step["p50_us"]), _ratio(row["ratio_p50"]), time(step["p99_us"]),
             str(step["collectives_per_step"]), f"{step['bytes_per_step']:,}"]
        )  # fmt: skip
    heading = f"training step (lower is better; ×base: ÷ run {comparison['baseline_run_id']}'s step at p50):"
    return [
        *wrap(heading),
        *(table(columns, rows) if rows else []),
        *(line for text in without_plan for line in wrap(text, hanging="    ")),
    ]


def _sweep_table_lines(statistics: dict) -> list[str]:
    """A size sweep per size as nccl-tests prints it (time in µs, algbw, busbw: the log's cells where it printed
    them): no count, percentiles or p99/p50, which one value per size does not have."""
    columns = [
        Column("collective / variant"),
        Column("size B", numeric=True),
        Column("time µs", numeric=True),
        Column("algbw GB/s", numeric=True, optional=True),
        Column("busbw GB/s", numeric=True),
    ]
    rows = []
    for entry in statistics["sweep"]["collectives"]:
        for sizes in entry["tables"]:
            what = " ".join(part for part in (entry["collective"], sizes["variant"]) if part)
            for row in sizes["rows"]:
                printed = row.get("printed") or {}
                rows.append(
                    [
                        what,
                        f"{row['size_bytes']:,}",
                        as_printed(row["time_us"], printed.get("time_us"), "time_us"),
                        as_printed(row["algbw_gbps"], printed.get("algbw_gbps"), "algbw_gbps"),
                        as_printed(row["busbw_gbps"], printed.get("busbw_gbps")),
                    ]
                )
    return table(columns, rows)


def _group_lines(document: dict) -> list[str]:
    """The compare page's first table: per (collective, size, variant), each run's p50 (a size sweep's mean,
    marked *), busbw and % of ideal with its ratio to the baseline, under the baseline's group it was read against
    (a training run's communicators under the benchmark's size); groups every run has first."""
    by_label: dict[str, list[tuple[dict, dict]]] = {}
    for row in document["runs"]:
        for group in row["groups"]:
            by_label.setdefault(group["compared_with"] or group["label"], []).append((row, group))
    labels = sorted(by_label, key=lambda label: len(by_label[label]) != len(document["runs"]))
    columns = [
        Column("group / run"),
        Column("p50 µs", numeric=True),
        Column("×base", numeric=True),
        Column("busbw GB/s", numeric=True),
        Column("×base", numeric=True, optional=True),
        Column("% ideal", numeric=True, optional=True),
        Column("×base", numeric=True, optional=True),
    ]
    rows = []
    for label in labels:
        rows.append([label, "", "", "", "", "", ""])
        # Beside a size sweep (no percentiles) every run of the group shows its mean: the ratio is of means.
        means = any("p50_us" not in group["stats"] for _, group in by_label[label])
        for row, group in by_label[label]:
            # A training run's group under a benchmark's (collective, size) is named by its communicator.
            variant = "" if group["label"] == label else " ".join(group["label"].split(" · ")[2:])
            stats, printed = group["stats"], group.get("printed")
            busbw = stats["busbw_gbps"]["value"]
            time, mark = (stats["mean_us"], "*") if means else (stats["p50_us"], "")
            rows.append(
                [
                    f"  #{row['run_id']} {row['name']}" + (f" {variant}" if variant else ""),
                    _time(time["value"], printed) + mark,
                    _ratio(time["ratio"]),
                    as_printed(busbw, printed.get("busbw_gbps")) if printed else gbps(busbw),
                    _ratio(stats["busbw_gbps"]["ratio"]),
                    percent(stats["pct_of_ideal"]["value"]),
                    _ratio(stats["pct_of_ideal"]["ratio"]),
                ]
            )
    lines = ["per data size and collective (×base: run ÷ baseline):", *table(columns, rows)]
    if any("p50_us" not in group["stats"] for row in document["runs"] for group in row["groups"]):
        lines += wrap("  * the mean: beside a size sweep (a few values per size, no percentiles)", hanging="    ")
    return lines


def _duration(us: float) -> str:
    """A time in the unit that suits it: '92.5 µs', '1.48 ms'."""
    from emuplan.results.analysis.run_analysis import time_unit

    unit, _ = time_unit(abs(us))
    return f"{time_in(us, unit)} {unit}"


def _straggler_lines(stragglers: dict) -> list[str]:
    """Who holds the collectives up (the run page's straggler section): the slowest rank and host, then
    every rank."""
    unit = stragglers["unit"]
    lines = wrap(f"stragglers (a {unit}'s time for a call is {stragglers['basis']}):")
    for kind, headline in ((unit, stragglers["slowest_rank"]), ("host", stragglers["slowest_host"])):
        if headline is None:
            continue
        where = f" on {headline['host']}" if headline.get("host") else ""
        lines += wrap(
            f"  slowest {kind} {headline['name']}{where}: {against_median(headline['over_median'])}× the median "
            f"{kind}, "
            f"{_duration(headline['lost_us'])} lost over {plural(headline['calls'], 'call')} "
            f"({_duration(headline['lost_per_call_us'])} per call)",
            hanging="    ",
        )
    columns = [
        Column(unit),
        Column("host"),
        Column("calls", numeric=True),
        Column("mean µs", numeric=True),
        Column("×median", numeric=True),
        Column("lost µs", numeric=True),
        Column("slowest", numeric=True, optional=True),
    ]
    rows = [
        [entry["name"], entry["host"] or "–", str(entry["calls"]), time_in(entry["mean_us"]),
         against_median(entry["over_median"]), time_in(entry["lost_us"]), str(entry["slowest_calls"])]
        for entry in stragglers["ranks"]
    ]  # fmt: skip
    return lines + table(columns, rows)


@app.command("compare")
def compare_runs(
    run_ids: Annotated[list[int], typer.Argument(help="Two or more run ids.")],
    baseline: Annotated[int | None, typer.Option(help="Baseline run id (default: the first).")] = None,
    link_gbps: LinkOption = None,
    latency_us: LatencyOption = None,
    ranks: RanksOption = None,
    plan: Annotated[
        list[str] | None,
        typer.Option(
            "--plan",
            help="A plan id to read every run with, or RUN:PLAN for one run (repeatable): what a training step "
            "of it costs on each run (default: each run's linked plan).",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Everything GET /api/compare returns, figures included.")
    ] = False,
    wide: WideOption = False,
) -> None:
    """Compare runs: what a training step of each run's plan costs on it, deltas against the baseline and a
    Kolmogorov–Smirnov test per pair (bandwidths and % of ideal under each run's assumptions, or the ones
    given, as GET /api/compare)."""
    set_wide(wide)
    every_run = [text for text in plan or [] if ":" not in text]
    pairs = ",".join(text for text in plan or [] if ":" in text)
    if len(every_run) > 1 or (every_run and not every_run[0].isdigit()):
        raise typer.BadParameter("give one plan id for every run, or RUN:PLAN pairs", param_hint="--plan")
    server = remote_server()
    if server is not None:
        query = {"runs": ",".join(map(str, run_ids)), "baseline": baseline}
        query |= {"plan": every_run[0] if every_run else None, "plans": pairs or None}
        document = server.get(
            "/api/compare", query | {"link_gbps": link_gbps, "latency_us": latency_us, "ranks": ranks}
        )
    else:
        from emuplan.results.analysis.step_cost import parse_plan_choices
        from emuplan.services import comparisons as comparison_service
        from emuplan.services import runs as run_service
        from emuplan.settings import get_settings

        choice = run_service.AssumptionChoice(link_gbps=link_gbps, latency_us=latency_us, ranks=ranks)
        every = {run_id: int(every_run[0]) for run_id in run_ids} if every_run else {}
        document = _with_store(
            lambda session: comparison_service.compare_stored_runs(
                session, run_ids, baseline, settings=get_settings(), choice=choice,
                plans=every | parse_plan_choices(pairs),
            )
        )  # fmt: skip
    if as_json:
        _echo_json(document)
        return
    lines = _step_cost_table(document["step_cost"])
    lines.append(f"baseline: run {document['baseline_run_id']}")
    if document["training_vs_emulation"]:
        lines += wrap(document["training_vs_emulation"])
    if document["notice"]:
        lines += wrap(f"note: {document['notice']}")
    for entry in document["assumptions"]:
        lines += wrap(f"run {entry['run_id']} {_assumptions_line(entry)}")
    if document["above_ideal"]:
        lines += wrap(_above_ideal_line(document["above_ideal"]["warning"]))
    distributions = [row for row in document["runs"] if row["overall"] is not None]
    if distributions:
        columns = [
            Column("run"),
            Column("n", numeric=True, optional=True),
            Column("p50 µs", numeric=True),
            Column("p50 ×base", numeric=True),
            Column("p99 µs", numeric=True),
            Column("p99 ×base", numeric=True, optional=True),
            Column("max µs", numeric=True, optional=True),
        ]
        rows = [
            [f"#{row['run_id']} {row['name']}", str(overall["count"]["value"]), time_in(overall["p50_us"]["value"]),
             _ratio(overall["p50_us"]["ratio"]), time_in(overall["p99_us"]["value"]),
             _ratio(overall["p99_us"]["ratio"]), time_in(overall["max_us"]["value"])]
            for row in distributions
            for overall in [row["overall"]]
        ]  # fmt: skip
        lines += ["all data sizes together (distributions only):", *table(columns, rows)]
        # Sweeps alone are compared size by size below; beside a distribution, this is the shared-size table.
        lines += _group_lines(document)
    if document["sweep"] is not None:
        lines += _sweep_comparison_lines(document["sweep"])
    if document["ks_tests"]:
        lines.append("Kolmogorov–Smirnov (do the completion-time distributions differ?):")
    for test in document["ks_tests"]:
        pair = f"  run {test['run_a']} vs run {test['run_b']}: "
        if not test["comparable"]:
            lines += wrap(pair + "not tested, no (collective, data size) in common", hanging="    ")
            continue
        lines += wrap(
            pair + f"D = {ks_statistic(test['statistic'])}, p = {p_value(test['pvalue'])} ({test['method']})",
            hanging="    ",
        )
    typer.echo("\n".join(lines))


def _sweep_comparison_lines(sweep: dict) -> list[str]:
    """The compare page's size-sweep section: each sweep's peak and average busbw, its verdict line against
    the reference sweep, and its busbw per size beside the reference's."""
    reference = sweep["reference_run_id"]
    lines = wrap(
        f"size sweeps against #{reference} (busbw per size, the mean of its out-of-place and in-place cells; "
        f"within ±{sweep['same_within_pct']:g} % is the same):"
    )
    for run in sweep["runs"]:
        for entry in run["headline"]:
            lines += wrap(
                f"  #{run['run_id']} {run['name']} {entry['collective']}: peak busbw "
                f"{gbps(entry['peak_busbw_gbps'])} GB/s, average busbw {gbps(entry['average_busbw_gbps'])} GB/s",
                hanging="    ",
            )
    reference_busbw = {
        (row["collective"], row["size_bytes"]): row["busbw_gbps"]
        for run in sweep["runs"]
        if run["run_id"] == reference
        for row in run["sizes"]
    }
    for run in sweep["runs"]:
        if run["verdict"] is None:
            continue
        lines += wrap(f"  {run['verdict']}", hanging="    ")
        columns = [
            Column("collective", optional=True),
            Column("size B", numeric=True),
            Column(f"#{reference} GB/s", numeric=True),
            Column(f"#{run['run_id']} GB/s", numeric=True),
            Column("×ref", numeric=True, optional=True),
            Column("change", numeric=True),
        ]
        rows = [
            [row["collective"], f"{row['size_bytes']:,}", gbps(reference_busbw[(row["collective"], row["size_bytes"])]),
             gbps(row["busbw_gbps"]), _ratio(row["busbw_ratio"]), f"{row['change_pct']:+.1f} %"]
            for row in run["sizes"]
            if row["verdict"] is not None
        ]  # fmt: skip
        if rows:
            lines += table(columns, rows, indent="    ")
    return lines
