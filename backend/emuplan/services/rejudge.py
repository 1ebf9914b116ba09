"""Judging every stored run again from its stored statistics, in a migration: when the verdict column came
(0015) and when what a verdict means changed (0020: NCCL's own model, 'not judged'). The same
``results.analysis.verdict.judge_summary`` the pages use, on each run's rank count (the linked plan's GPUs first, as
every page reads it) and the platform it names, built-in or stored."""

import json

import sqlalchemy as sa

from emuplan.results.analysis.verdict import judge_summary
from emuplan.workload.platforms import BUILTIN_PLATFORMS, make_platform

_DATABASE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_RUN = sa.table(
    "run",
    sa.column("id", _DATABASE_ID),
    sa.column("plan_id", _DATABASE_ID),
    sa.column("kind", sa.String),
    sa.column("ranks", sa.BigInteger),
    sa.column("hosts", sa.BigInteger),
    sa.column("platform", sa.String),
    sa.column("verdict", sa.String),
)
_PLAN = sa.table("plan", sa.column("id", _DATABASE_ID), sa.column("inputs", sa.JSON))
_RUN_SUMMARY = sa.table("run_summary", sa.column("run_id", _DATABASE_ID), sa.column("summary", sa.JSON))
# What profiles stored before 0020 held that a profile no longer has: NCCL 2.7's one α per level.
_RETIRED_FIELDS = ("id", "created_at", "updated_at", "scale_up_alpha_us", "scale_out_alpha_us")


def _json(value):
    return json.loads(value) if isinstance(value, str) else value


def judge_every_run(connection: sa.Connection) -> None:
    stored = {}
    for row in connection.execute(sa.text("SELECT * FROM platform")).mappings():
        values = {key: value for key, value in row.items() if key not in _RETIRED_FIELDS}
        values["sources"] = _json(values.get("sources")) or []
        stored[row["name"]] = make_platform(values)
    profiles = {**BUILTIN_PLATFORMS, **stored}
    query = (
        sa.select(
            _RUN.c.id, _RUN.c.kind, _RUN.c.ranks, _RUN.c.hosts, _RUN.c.platform, _PLAN.c.inputs, _RUN_SUMMARY.c.summary
        )
        .join(_RUN_SUMMARY, _RUN_SUMMARY.c.run_id == _RUN.c.id)
        .outerjoin(_PLAN, _PLAN.c.id == _RUN.c.plan_id)
    )
    for run_id, kind, ranks, hosts, platform, inputs, summary in connection.execute(query).all():
        summary = _json(summary)
        if not summary.get("groups"):
            continue
        ranks = (_json(inputs) or {}).get("gpus") or ranks
        verdict = judge_summary(summary, kind, ranks=ranks, hosts=hosts, platform=profiles.get(platform))
        connection.execute(_RUN.update().where(_RUN.c.id == run_id).values(verdict=verdict.status))
