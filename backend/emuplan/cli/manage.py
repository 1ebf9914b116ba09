"""``emuplan runs edit|delete``, ``emuplan plans [edit|delete]``, ``emuplan comparisons [edit|delete]`` and a
comparison's share links (``shares``, ``share``, ``share-label``, ``unshare``): the same
changes as the API's PATCH and DELETE (same store calls locally, the API with --server), by the roles the API
allows them (with sign-in on a server: editors edit, admins delete). Deleting says first what else changes and
asks, unless --yes."""

import json
from datetime import datetime
from typing import Annotated

import typer

from emuplan.cli.app import app, fail, in_store, remote_server
from emuplan.cli.layout import wrap
from emuplan.cli.relabel_progress import waited_for_server
from emuplan.cli.results import MeasuredAtOption, runs_app
from emuplan.results.run_fields import RUN_FIELDS
from emuplan.wording import plural

plans_app = typer.Typer(
    help="List stored plans (their ids are what export-workload and --plan take); edit or delete one.",
    invoke_without_command=True,
)
app.add_typer(plans_app, name="plans")
comparisons_app = typer.Typer(
    help="List saved comparisons; edit or delete one; list, make, label or revoke its share links.",
    invoke_without_command=True,
)
app.add_typer(comparisons_app, name="comparisons")

NameOption = Annotated[str | None, typer.Option("--name", help="Its new name.")]
TagsOption = Annotated[list[str] | None, typer.Option("--tag", help="Its tags (replace them); repeat for several.")]
NoTagsOption = Annotated[bool, typer.Option("--no-tags", help="Remove every tag.")]
NoteOption = Annotated[str | None, typer.Option("--note", help="Its note (free text); '' clears it.")]
YesOption = Annotated[bool, typer.Option("--yes", help="Delete without asking.")]
JsonOption = Annotated[bool, typer.Option("--json")]


def _echo_json(document) -> None:
    typer.echo(json.dumps(document, indent=2, default=str))


def _tags(tags: list[str] | None, no_tags: bool) -> list[str] | None:
    if tags and no_tags:
        fail("--tag and --no-tags contradict each other")
    return [] if no_tags else tags


def merged_facts(current: dict[str, str], given: list[str]) -> dict[str, str]:
    """The run's facts with each ``key=value`` set (another case of the key replaces it) and each ``key=``
    removed."""
    facts = dict(current)
    for text in given:
        key, equals, value = text.partition("=")
        if not equals or not key.strip():
            fail(f"--fact {text!r}: give key=value (key= removes the fact)")
        facts = {known: stated for known, stated in facts.items() if known.casefold() != key.strip().casefold()}
        if value.strip():
            facts[key.strip()] = value.strip()
    return facts


def _changes(**fields) -> dict:
    """The fields given (None: not given); at least one."""
    changes = {key: value for key, value in fields.items() if value is not None}
    if not changes:
        fail(
            "nothing to change: give --name, --tag, --no-tags or --note"
            + (", --fact, --platform, --measured-at, --plan or --no-plan" if "facts" in fields else "")
        )
    return changes


def _cleared(changes: dict) -> dict:
    """A run's changes with ``--platform none`` as the API's ``"platform": null``."""
    return {**changes, "platform": None} if changes.get("platform") == "none" else changes


def _edited(kind: str, path: str, changes: dict, update_stored) -> None:
    """A plan's or comparison's ``changes`` made through the server's PATCH ``path``, else in the local store
    (``update_stored(session)`` → its document); one line says what it is now."""
    server = remote_server()
    document = server.patch(path, changes) if server is not None else in_store(update_stored, write=True)
    typer.echo(f"{kind} {document['id']}: {document['name']}; tags: {', '.join(document['tags']) or 'none'}")


def _confirmed(question: str, yes: bool) -> None:
    if not yes and not typer.confirm(question, default=False):
        typer.echo("not deleted")
        raise typer.Exit(1)


@runs_app.command("edit")
def edit_run(
    run_id: Annotated[int, typer.Argument(help="Run id.")],
    name: Annotated[str | None, typer.Option("--name", help=RUN_FIELDS["name"].described())] = None,
    tags: Annotated[
        list[str] | None,
        typer.Option("--tag", help=RUN_FIELDS["tags"].described("They replace its tags; repeat for several.")),
    ] = None,
    no_tags: NoTagsOption = False,
    note: Annotated[str | None, typer.Option("--note", help=RUN_FIELDS["note"].described("'' clears it."))] = None,
    fact: Annotated[
        list[str] | None,
        typer.Option(
            "--fact", help=RUN_FIELDS["facts"].described("Set one as key=value (key= removes it); repeat for several.")
        ),
    ] = None,
    plan: Annotated[int | None, typer.Option("--plan", help=RUN_FIELDS["plan_id"].described())] = None,
    no_plan: Annotated[bool, typer.Option("--no-plan", help="Unlink its plan.")] = False,
    platform: Annotated[
        str | None, typer.Option("--platform", help=RUN_FIELDS["platform"].described("'none' clears it."))
    ] = None,
    measured_at: MeasuredAtOption = None,
    as_json: JsonOption = False,
) -> None:
    """Rename, retag, annotate a run, state its fabric facts, its platform and when it was measured, link it to a
    plan or unlink it."""
    if plan is not None and no_plan:
        fail("--plan and --no-plan contradict each other")
    server = remote_server()
    # Unlinking is the one change whose value is None: the API's "plan_id": null; 0 says it here (RunUpdate).
    plan_id = 0 if no_plan else plan
    fields = {"name": name, "tags": _tags(tags, no_tags), "note": note, "plan_id": plan_id, "facts": None}
    fields |= {"platform": platform, "measured_at": measured_at}
    if server is not None:
        if fact:
            fields["facts"] = merged_facts(server.get(f"/api/runs/{run_id}")["facts"], fact)
        changes = _cleared(_changes(**fields))
        if measured_at is not None:
            changes["measured_at"] = measured_at.isoformat()
        answer = server.patch(f"/api/runs/{run_id}", {**changes, **({"plan_id": None} if no_plan else {})})
        document = waited_for_server(server, run_id, answer)  # a huge run linked: its relabel job followed
    else:
        from emuplan.results.budget import ImportLimits
        from emuplan.services import runs as run_service
        from emuplan.settings import get_settings
        from emuplan.store import runs as run_rows

        def edit(session) -> dict:
            if fact:
                fields["facts"] = merged_facts(run_rows.get_run(session, run_id).facts, fact)
            changes = _changes(**fields)
            limits = ImportLimits.from_settings(get_settings())
            update = run_service.RunUpdate(**_cleared(changes))
            return run_rows.run_public(run_service.update_run(session, run_id, update, limits))

        document = in_store(edit, write=True)
    if as_json:
        _echo_json(document)
        return
    facts = ", ".join(f"{key} = {value}" for key, value in document["facts"].items()) or "none"
    typer.echo(f"run {document['id']}: {document['name']}")
    typer.echo(f"  tags: {', '.join(document['tags']) or 'none'}; plan: {document['plan_id'] or 'none'}")
    typer.echo(f"  facts: {facts}")
    if document["note"]:
        typer.echo(f"  note: {document['note']}")


def _run_consequences(account: dict) -> str:
    if not account["comparisons"]:
        return "It is in no saved comparison."
    listed = ", ".join(f"#{c['id']} {c['name']!r}" for c in account["comparisons"])
    return f"It is in {plural(len(account['comparisons']), 'saved comparison')} ({listed}): they show their other runs."


@runs_app.command("delete")
def delete_run(run_id: Annotated[int, typer.Argument(help="Run id.")], yes: YesOption = False) -> None:
    """Delete a run with its samples and statistics (the admin role on a server with sign-in)."""
    server = remote_server()
    if server is not None:
        _confirmed(f"{_run_consequences(server.get(f'/api/runs/{run_id}/deletion'))} Delete run {run_id}?", yes)
        server.delete(f"/api/runs/{run_id}")
    else:
        from emuplan.store import runs as run_rows

        consequences = _run_consequences(in_store(lambda session: run_rows.run_deletion(session, run_id)))
        _confirmed(f"{consequences} Delete run {run_id}?", yes)
        in_store(lambda session: run_rows.delete_run(session, run_id), write=True)
    typer.echo(f"deleted run {run_id}")


@plans_app.callback()
def list_plans(context: typer.Context, as_json: JsonOption = False) -> None:
    """Stored plans, newest first: their ids are what export-workload, import --plan and measure take."""
    if context.invoked_subcommand is not None:
        return
    server = remote_server()
    if server is not None:
        documents = list(server.pages("/api/plans", {}, page_size=1000))
    else:
        from emuplan.store import plans as store

        documents = in_store(lambda session: [plan._asdict() for plan in store.list_plans(session, limit=100_000)])
    if as_json:
        _echo_json(documents)
        return
    for plan in documents:
        tags = f" [{', '.join(plan['tags'])}]" if plan["tags"] else ""
        platform = f" on {plan['platform']}" if plan["platform"] else ""
        line = f"{plan['id']:>5}  {plan['name']} ({plan['strategy']}, {plan['mode']}, {plural(plan['trials'], 'trial')}"
        typer.echo("\n".join(wrap(f"{line}{platform}){tags}", hanging=" " * 7)))


def _plan_public(plan) -> dict:
    return {"id": plan.id, "name": plan.name, "tags": plan.tags, "note": plan.note}


@plans_app.command("edit")
def edit_plan(
    plan_id: Annotated[int, typer.Argument(help="Plan id.")],
    name: NameOption = None,
    tags: TagsOption = None,
    no_tags: NoTagsOption = False,
    note: NoteOption = None,
) -> None:
    """Rename, retag or annotate a plan (its inputs never change: plan again for others)."""
    from emuplan.store import plans as store

    changes = _changes(name=name, tags=_tags(tags, no_tags), note=note)
    _edited(
        "plan",
        f"/api/plans/{plan_id}",
        changes,
        lambda session: _plan_public(store.update_plan(session, plan_id, **changes)),
    )


def _plan_consequences(account: dict) -> str:
    runs = account["unlinked_run_ids"]
    if not runs:
        said = "No run is linked to it."
    else:
        listed = ", ".join(f"#{run}" for run in runs)
        said = f"{plural(len(runs), 'run is', 'runs are')} linked to it ({listed}): they will be unlinked."
    if account["comparisons"]:
        listed = ", ".join(f"#{c['id']} {c['name']!r}" for c in account["comparisons"])
        said += (
            f" {plural(len(account['comparisons']), 'saved comparison reads', 'saved comparisons read')} a run with "
            f"it ({listed}): they will read it with its own plan."
        )
    return said


@plans_app.command("delete")
def delete_plan(plan_id: Annotated[int, typer.Argument(help="Plan id.")], yes: YesOption = False) -> None:
    """Delete a plan; the runs linked to it are unlinked (the admin role on a server with sign-in)."""
    server = remote_server()
    if server is not None:
        _confirmed(f"{_plan_consequences(server.get(f'/api/plans/{plan_id}/deletion'))} Delete plan {plan_id}?", yes)
        account = server.delete(f"/api/plans/{plan_id}")
    else:
        from emuplan.results.budget import ImportLimits
        from emuplan.services import plan_deletion
        from emuplan.settings import get_settings

        preview = in_store(lambda session: plan_deletion.plan_deletion(session, plan_id))
        _confirmed(f"{_plan_consequences(preview)} Delete plan {plan_id}?", yes)
        limits = ImportLimits.from_settings(get_settings())
        account = in_store(lambda session: plan_deletion.delete_plan(session, plan_id, limits), write=True)
    unlinked = account["unlinked_run_ids"]
    typer.echo(f"deleted plan {plan_id}" + (f"; unlinked {plural(len(unlinked), 'run')}" if unlinked else ""))


@comparisons_app.callback()
def list_comparisons(context: typer.Context, as_json: JsonOption = False) -> None:
    """Saved comparisons, newest first."""
    if context.invoked_subcommand is not None:
        return
    server = remote_server()
    if server is not None:
        documents = server.get("/api/comparisons")
    else:
        from emuplan.store import comparisons as store

        documents = in_store(
            lambda session: [store.comparison_document(c) for c in store.list_comparisons(session, limit=100_000)]
        )
    if as_json:
        _echo_json(documents)
        return
    for comparison in documents:
        tags = f" [{', '.join(comparison['tags'])}]" if comparison["tags"] else ""
        runs = ", ".join(f"#{run_id}" for run_id in comparison["run_ids"])
        typer.echo("\n".join(wrap(f"{comparison['id']:>5}  {comparison['name']} (runs {runs}){tags}", hanging=" " * 7)))


@comparisons_app.command("edit")
def edit_comparison(
    comparison_id: Annotated[int, typer.Argument(help="Comparison id.")],
    name: NameOption = None,
    tags: TagsOption = None,
    no_tags: NoTagsOption = False,
    note: NoteOption = None,
) -> None:
    """Rename, retag or annotate a saved comparison."""
    from emuplan.store import comparisons as store

    changes = _changes(name=name, tags=_tags(tags, no_tags), note=note)
    _edited(
        "comparison",
        f"/api/comparisons/{comparison_id}",
        changes,
        lambda session: store.comparison_document(store.update_comparison(session, comparison_id, **changes)),
    )


def _comparison_consequences(account: dict) -> str:
    if not account["share_links"]:
        return "It has no share link; its runs stay."
    return (
        f"It has {plural(account['share_links'], 'share link')} ({account['active_share_links']} active): they are "
        "deleted with it; its runs stay."
    )


@comparisons_app.command("delete")
def delete_comparison(
    comparison_id: Annotated[int, typer.Argument(help="Comparison id.")], yes: YesOption = False
) -> None:
    """Delete a saved comparison and its share links (the admin role on a server with sign-in)."""
    question = f"Delete comparison {comparison_id}?"
    server = remote_server()
    if server is not None:
        preview = server.get(f"/api/comparisons/{comparison_id}/deletion")
        _confirmed(f"{_comparison_consequences(preview)} {question}", yes)
        server.delete(f"/api/comparisons/{comparison_id}")
    else:
        from emuplan.store import comparisons as store

        preview = in_store(lambda session: store.comparison_deletion(session, comparison_id))
        _confirmed(f"{_comparison_consequences(preview)} {question}", yes)
        in_store(lambda session: store.delete_comparison(session, comparison_id), write=True)
    typer.echo(f"deleted comparison {comparison_id}")


ComparisonId = Annotated[int, typer.Argument(help="Comparison id.")]
ShareId = Annotated[int, typer.Argument(help="Share link id (emuplan comparisons shares COMPARISON_ID).")]


def _share_line(link: dict) -> str:
    expires = f"expires {link['expires_at']:%Y-%m-%d %H:%M} UTC" if link["expires_at"] else "never expires"
    label = f" {link['label']!r}" if link["label"] else ""
    return f"{link['id']:>5}  {link['state']}{label}; made {link['created_at']:%Y-%m-%d %H:%M} UTC, {expires}"


def _share_links(stored, path: str, method: str, body: dict | None = None):
    """A share link call through the server's API (``method`` on ``path``, dates parsed), else ``stored(session)``
    on the local store, which returns the same document(s) the API would."""

    server = remote_server()
    if server is None:
        return in_store(stored, write=method != "get")
    answer = getattr(server, method)(path, *([body] if body is not None else []))
    for link in answer if isinstance(answer, list) else [answer]:
        for key in ("created_at", "expires_at", "revoked_at"):
            link[key] = datetime.fromisoformat(link[key]) if link[key] else None
    return answer


@comparisons_app.command("shares")
def list_share_links(comparison_id: ComparisonId, as_json: JsonOption = False) -> None:
    """A saved comparison's share links, oldest first: active, expired or revoked (a revoked one stays listed)."""
    from emuplan.store import comparisons as store

    def listed(session) -> list[dict]:
        store.get_comparison(session, comparison_id)
        return [store.share_link_document(link) for link in store.list_share_links(session, comparison_id)]

    links = _share_links(listed, f"/api/comparisons/{comparison_id}/shares", "get")
    if as_json:
        _echo_json(links)
        return
    if not links:
        typer.echo(f"comparison {comparison_id} has no share link: emuplan comparisons share {comparison_id}")
    for link in links:
        typer.echo(_share_line(link))


@comparisons_app.command("share")
def make_share_link(
    comparison_id: ComparisonId,
    label: Annotated[str, typer.Option(help="Whom or what it is for.")] = "",
    expires_in_days: Annotated[float | None, typer.Option("--expires-in-days", help="Default: never expires.")] = None,
) -> None:
    """A new read-only link to a saved comparison for people without an account; its address is shown once."""
    from emuplan.store import comparisons as store

    def made(session) -> dict:
        link, token = store.create_share_link(session, comparison_id, expires_in_days, label)
        return {**store.share_link_document(link), "token": token, "path": f"/s/{token}"}

    link = _share_links(
        made,
        f"/api/comparisons/{comparison_id}/shares",
        "post",
        {"label": label, "expires_in_days": expires_in_days},
    )
    server = remote_server()
    where = (
        server.url.rstrip("/") + link["path"] if server is not None else f"{link['path']} after the dashboard's address"
    )
    typer.echo(_share_line(link))
    typer.echo(f"  opens it, shown once: {where}")


@comparisons_app.command("share-label")
def label_share_link(
    comparison_id: ComparisonId,
    share_id: ShareId,
    label: Annotated[str, typer.Argument(help="Whom or what it is for ('' clears it).")],
) -> None:
    """Say whom or what a share link is for; its address and life stay."""
    from emuplan.store import comparisons as store

    link = _share_links(
        lambda session: store.share_link_document(store.relabel_share_link(session, comparison_id, share_id, label)),
        f"/api/comparisons/{comparison_id}/shares/{share_id}",
        "patch",
        {"label": label},
    )
    typer.echo(_share_line(link))


@comparisons_app.command("unshare")
def revoke_share_link(comparison_id: ComparisonId, share_id: ShareId) -> None:
    """Revoke a share link: it stops opening the comparison at once (and stays listed, revoked)."""
    from emuplan.store import comparisons as store

    link = _share_links(
        lambda session: store.share_link_document(store.revoke_share_link(session, comparison_id, share_id)),
        f"/api/comparisons/{comparison_id}/shares/{share_id}",
        "delete",
    )
    typer.echo(_share_line(link))
