"""Deleting a plan keeps what refers to it consistent: its runs are unlinked (their statistics computed again
without its network, their verdicts judged again without its GPUs), comparisons that read a run with it read
the run with its own plan again (``comparisons.saved_plans`` skips a plan that is gone), its finished
simulations go with it (they describe nothing else), and a plan being measured or simulated is not deleted.

Apart from ``store.plans`` because it changes runs (``services.runs`` reads plans: the other way round would be
a circle)."""

from sqlmodel import Session, col, select

from emuplan.errors import EmuplanError
from emuplan.results.budget import ImportLimits
from emuplan.services.runs import RunUpdate, summarised_again_in_background, update_run
from emuplan.store import jobs
from emuplan.store.plans import get_plan
from emuplan.store.tables import Comparison, Run


class PlanInUse(EmuplanError, ValueError):
    """HTTP 409: a measurement or a simulation of the plan is running, or a huge run is linked to it."""

    http_status = 409


def plan_deletion(session: Session, plan_id: int) -> dict:
    """What deleting the plan does besides (its page's confirmation, the CLI's question): the runs linked to it,
    which are unlinked, and the saved comparisons that read a run with it, which read that run with its own plan
    again."""
    plan = get_plan(session, plan_id)
    linked = session.exec(select(Run.id).where(Run.plan_id == plan_id).order_by(col(Run.id))).all()
    # A comparison keeps its plans in its options (run id -> plan id), not in a column a query could match.
    saved = session.exec(select(Comparison.id, Comparison.name, Comparison.options).order_by(col(Comparison.id)))
    reading = [
        {"id": comparison_id, "name": name}
        for comparison_id, name, options in saved
        if plan_id in options.get("plans", {}).values()
    ]
    return {"plan_id": plan.id, "name": plan.name, "unlinked_run_ids": list(linked), "comparisons": reading}


def delete_plan(session: Session, plan_id: int, limits: ImportLimits) -> dict:
    """Delete the plan after unlinking its runs (in the caller's session, flushed); ``plan_deletion``'s account.
    Refused while a huge run (``limits``) is linked: unlinking it computes its statistics again, minutes of work
    that is a relabel job of its own, not part of this one."""
    consequences = plan_deletion(session, plan_id)
    huge = [
        run_id for run_id in consequences["unlinked_run_ids"] if summarised_again_in_background(session, run_id, limits)
    ]
    if huge:
        listed = ", ".join(map(str, huge))
        raise PlanInUse(
            f"plan {plan_id} is linked to huge run{'s' if len(huge) > 1 else ''} {listed}, whose statistics are "
            f"computed again by a job once unlinked: unlink {'them' if len(huge) > 1 else 'it'} first (emuplan runs "
            f'edit {huge[0]} --no-plan, or PATCH /api/runs/{huge[0]} with {{"plan_id": null}}), then delete the plan'
        )
    measuring = jobs.active_job(session, "measurement", plan_id=plan_id)
    if measuring is not None:
        raise PlanInUse(f"plan {plan_id} is being measured (job {measuring}): cancel the measurement first")
    simulating = jobs.active_job(session, "simulation", plan_id=plan_id)
    if simulating is not None:
        raise PlanInUse(f"plan {plan_id} is being simulated (job {simulating}): cancel the simulation first")
    jobs.delete_jobs(session, "simulation", plan_id=plan_id)
    for run_id in consequences["unlinked_run_ids"]:
        update_run(session, run_id, RunUpdate(plan_id=None))
    session.delete(get_plan(session, plan_id))
    session.flush()
    return consequences
