"""Saved comparisons and their read-only share links.

A share link's token is shown once, when it is made; the database keeps only its SHA-256, so a copy
of the database does not open any link. Links are never deleted: revoking stamps ``revoked_at`` and
an expired or revoked link answers 410 Gone, so its owner can still see that it existed and when it
stopped working.
"""

from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlmodel import Session, col, select

from emuplan.errors import EmuplanError
from emuplan.store.credentials import credential_state, hash_token, new_secret, revoke
from emuplan.store.rows import NotFound, get_row, relabel
from emuplan.store.tables import Comparison, Plan, Run, ShareLink, utc_now

MAX_SHARE_DAYS = 3650


class ComparisonNotFound(NotFound):
    pass


class ShareLinkNotFound(NotFound):
    pass


# Share pages are opened by people outside the team; their URL must not travel in a Referer header.
SHARE_REFERRER_POLICY = "no-referrer"


class ShareLinkGone(EmuplanError):
    """The link existed but is expired or revoked: HTTP 410."""

    http_status = 410
    http_headers = {"Referrer-Policy": SHARE_REFERRER_POLICY}

    def __init__(self, reason: str):
        super().__init__(f"{reason.capitalize()}: ask its owner for a new one.")
        self.reason = reason


def _validated_run_ids(session: Session, run_ids: list[int], baseline_run_id: int | None) -> list[int]:
    if not run_ids:
        raise ValueError("runs: choose at least one run to compare")
    unique_ids = list(dict.fromkeys(run_ids))
    found = set(session.exec(select(Run.id).where(col(Run.id).in_(unique_ids))).all())
    missing = [run_id for run_id in unique_ids if run_id not in found]
    if missing:
        raise ValueError(f"runs: no run with id {', '.join(map(str, missing))}")
    if baseline_run_id is not None and baseline_run_id not in unique_ids:
        raise ValueError(f"baseline_run_id: run {baseline_run_id} is not one of the compared runs")
    return unique_ids


def _validated_plans(session: Session, plans: dict[int, int], run_ids: list[int]) -> dict[str, int]:
    """The plan chosen per run, keyed by the run id as text (JSON's object keys)."""
    for run_id, plan_id in plans.items():
        if run_id not in run_ids:
            raise ValueError(f"plans: run {run_id} is not one of the compared runs")
        if session.get(Plan, plan_id) is None:
            raise ValueError(f"plans: no plan with id {plan_id} (for run {run_id})")
    return {str(run_id): plan_id for run_id, plan_id in plans.items()}


def create_comparison(
    session: Session,
    name: str,
    run_ids: list[int],
    baseline_run_id: int | None,
    options: dict,
    *,
    assumptions: dict | None = None,
    plans: dict[int, int] | None = None,
) -> Comparison:
    """A saved comparison. ``assumptions`` (the link speed, α and ranks the reader set) and ``plans`` (run id
    → the plan it was read with) are kept in ``options`` and are what its pages and share links show."""
    name = name.strip()
    if not name:
        raise ValueError("name: a comparison needs a name")
    ids = _validated_run_ids(session, run_ids, baseline_run_id)
    comparison = Comparison(
        name=name,
        run_ids=ids,
        baseline_run_id=baseline_run_id if baseline_run_id is not None else ids[0],
        options={
            **options,
            "assumptions": {key: value for key, value in (assumptions or {}).items() if value is not None},
            "plans": _validated_plans(session, plans or {}, ids),
        },
    )
    session.add(comparison)
    session.flush()
    return comparison


def list_comparisons(session: Session, limit: int = 100) -> list[Comparison]:
    statement = select(Comparison).order_by(col(Comparison.created_at).desc(), col(Comparison.id).desc())
    return list(session.exec(statement.limit(limit)).all())


def get_comparison(session: Session, comparison_id: int) -> Comparison:
    return get_row(session, Comparison, comparison_id, ComparisonNotFound, "comparison")


def update_comparison(
    session: Session,
    comparison_id: int,
    *,
    name: str | None = None,
    tags: list[str] | None = None,
    note: str | None = None,
) -> Comparison:
    """Rename, retag or annotate a saved comparison (each None: as it is), in the caller's session (flushed)."""
    return relabel(session, get_comparison(session, comparison_id), "comparison", name=name, tags=tags, note=note)


def comparison_deletion(session: Session, comparison_id: int) -> dict:
    """What deleting the comparison does besides: its share links stop opening it (they answer 404)."""
    comparison = get_comparison(session, comparison_id)
    links = list_share_links(session, comparison_id)
    active = [link.id for link in links if credential_state(link) == "active"]
    return {
        "comparison_id": comparison.id,
        "name": comparison.name,
        "share_links": len(links),
        "active_share_links": len(active),
    }


def delete_comparison(session: Session, comparison_id: int) -> dict:
    """Delete the comparison and its share links (its runs stay); ``comparison_deletion``'s account."""
    consequences = comparison_deletion(session, comparison_id)
    session.exec(delete(ShareLink).where(ShareLink.comparison_id == comparison_id))
    session.delete(get_comparison(session, comparison_id))
    session.flush()
    return consequences


def find_comparison_by_name(session: Session, name: str) -> Comparison | None:
    return session.exec(select(Comparison).where(Comparison.name == name)).first()


def create_share_link(
    session: Session, comparison_id: int, expires_in_days: float | None = None, label: str = ""
) -> tuple[ShareLink, str]:
    """A new link and its token. The token is returned here and nowhere else, ever. ``label``: whom or what
    it is for."""
    get_comparison(session, comparison_id)
    expires_at = None
    if expires_in_days is not None:
        if not 0 < expires_in_days <= MAX_SHARE_DAYS:
            raise ValueError(f"expires_in_days: must be between 0 and {MAX_SHARE_DAYS}, got {expires_in_days}")
        expires_at = utc_now() + timedelta(days=expires_in_days)
    token = new_secret()
    link = ShareLink(
        comparison_id=comparison_id, token_hash=hash_token(token), expires_at=expires_at, label=_label(label)
    )
    session.add(link)
    session.flush()
    return link, token


def list_share_links(session: Session, comparison_id: int) -> list[ShareLink]:
    statement = select(ShareLink).where(ShareLink.comparison_id == comparison_id).order_by(col(ShareLink.id))
    return list(session.exec(statement).all())


MAX_LABEL = 200


def _label(label: str) -> str:
    if len(label.strip()) > MAX_LABEL:
        raise ValueError(f"label: at most {MAX_LABEL} characters")
    return label.strip()


def _share_link(session: Session, comparison_id: int, share_id: int) -> ShareLink:
    link = session.get(ShareLink, share_id)
    if link is None or link.comparison_id != comparison_id:
        raise ShareLinkNotFound(f"comparison {comparison_id} has no share link {share_id}")
    return link


def relabel_share_link(session: Session, comparison_id: int, share_id: int, label: str) -> ShareLink:
    """Name whom or what a link is for; its token and life stay."""
    link = _share_link(session, comparison_id, share_id)
    link.label = _label(label)
    session.add(link)
    session.flush()
    return link


def revoke_share_link(session: Session, comparison_id: int, share_id: int) -> ShareLink:
    link = _share_link(session, comparison_id, share_id)
    revoke(session, link)
    return link


def resolve_share_token(session: Session, token: str, now: datetime | None = None) -> Comparison:
    """The comparison a token opens; ShareLinkNotFound for an unknown token, ShareLinkGone when it ended."""
    link = session.exec(select(ShareLink).where(ShareLink.token_hash == hash_token(token))).first()
    if link is None:
        raise ShareLinkNotFound("no such share link")
    state = credential_state(link, now)
    if state != "active":
        raise ShareLinkGone(f"this share link was {state}")
    return get_comparison(session, link.comparison_id)


def share_link_document(link: ShareLink) -> dict:
    return {
        "id": link.id,
        "comparison_id": link.comparison_id,
        "label": link.label,
        "created_at": link.created_at,
        "expires_at": link.expires_at,
        "revoked_at": link.revoked_at,
        "state": credential_state(link),
    }


def comparison_document(comparison: Comparison) -> dict:
    return {
        "id": comparison.id,
        "name": comparison.name,
        "run_ids": comparison.run_ids,
        "baseline_run_id": comparison.baseline_run_id,
        "options": comparison.options,
        "tags": comparison.tags,
        "note": comparison.note,
        "created_at": comparison.created_at,
    }


def present_runs(session: Session, comparison: Comparison) -> list[Run]:
    """The comparison's runs that still exist, in the saved order (a run deleted later drops out)."""
    runs = {run.id: run for run in session.exec(select(Run).where(col(Run.id).in_(comparison.run_ids))).all()}
    return [runs[run_id] for run_id in comparison.run_ids if run_id in runs]


def saved_plans(session: Session, comparison: Comparison, runs: list[Run]) -> dict[int, int]:
    """The plan each present run was saved to be read with, where that plan still exists."""
    present = {run.id for run in runs}
    chosen = {int(run_id): plan_id for run_id, plan_id in comparison.options.get("plans", {}).items()}
    kept = {run_id: plan_id for run_id, plan_id in chosen.items() if run_id in present}
    existing = set(session.exec(select(Plan.id).where(col(Plan.id).in_(list(kept.values())))).all())
    return {run_id: plan_id for run_id, plan_id in kept.items() if plan_id in existing}


def present_baseline(comparison: Comparison, runs: list[Run]) -> int | None:
    ids = [run.id for run in runs]
    return comparison.baseline_run_id if comparison.baseline_run_id in ids else (ids[0] if ids else None)
