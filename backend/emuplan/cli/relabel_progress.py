"""How ``emuplan relabel`` (and ``emuplan runs edit --plan`` through a server) wait for a huge run's statistics to
be computed again (a minute or more at 100 M rows), printing the progress on stderr: through a server, by following
the relabel job its PATCH answered 202 with (Ctrl-C cancels the job); on the local database, by doing the job's
work here."""

import time

import typer

from emuplan.cli.failure import fail
from emuplan.wording import size_label

POLL_S = 0.5


class ProgressLines:
    """One stderr line each time the stage or the tenth of the bytes read changes."""

    def __init__(self, run_id: int) -> None:
        self._run_id, self._last = run_id, None

    def show(self, state: str, done: int = 0, total: int | None = None) -> None:
        tenth = done * 10 // total if state == "copying" and total else None
        if (state, tenth) == self._last:
            return
        self._last = (state, tenth)
        detail = f" {tenth * 10}% of {size_label(total)}" if tenth is not None else ""
        typer.echo(f"run {self._run_id}: summarising again: {state}{detail}", err=True)


def waited_for_server(server, run_id: int, answer: dict) -> dict:
    """The run a PATCH changed: ``answer`` itself, or once the relabel job ``answer`` is has succeeded."""
    if "cancel_url" not in answer:  # the run itself: changed in the request
        return answer
    job, lines = answer, ProgressLines(run_id)
    try:
        while job["finished_at"] is None:
            lines.show(job["state"], job["bytes_done"], job["bytes_total"])
            time.sleep(POLL_S)
            job = server.get(job["url"])
    except KeyboardInterrupt:
        job = server.delete(job["cancel_url"])
    if job["state"] != "succeeded":
        fail(f"relabel job {job['id']} {job['state']}: {job['error']}")
    lines.show("succeeded")
    return server.get(f"/api/runs/{run_id}")


def summarised_locally(run_id: int, collectives: dict[str, str]) -> bool:
    """When the run is huge, its statistics computed again here with ``collectives`` renamed, the progress
    printed; False (nothing done) for a run relabelled in one transaction (``relabel_collectives``)."""
    from emuplan.cli.app import open_database
    from emuplan.results.budget import ImportLimits
    from emuplan.services import runs as run_service
    from emuplan.settings import get_settings
    from emuplan.store import runs as run_rows

    limits = ImportLimits.from_settings(get_settings())
    database = open_database()
    try:
        with database.read_session() as session:
            if not run_service.summarised_again_in_background(session, run_id, limits):
                return False
            plan_id = run_rows.get_run(session, run_id).plan_id
            total = run_rows.stored_table_bytes(session, run_id)
        lines, read = ProgressLines(run_id), [0]

        def on_read(size: int) -> None:
            read[0] = min(read[0] + size, total)
            lines.show("copying", read[0], total)

        run_service.summarise_again_streamed(
            database, run_id, collectives, plan_id, limits,
            on_read=on_read, on_stage=lines.show, in_last_transaction=lambda session: None,
        )  # fmt: skip
        lines.show("succeeded")
        return True
    except (LookupError, ValueError) as error:
        fail(str(error))
    finally:
        database.dispose()
