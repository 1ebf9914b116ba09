"""Tables as the first migration made them, for migration tests that fill a database at an old
revision (the models' own tables would name columns added later)."""

from datetime import UTC, datetime

import sqlalchemy as sa

from emuplan.store.tables import Plan, Run

RUN_0001_COLUMNS = (
    "id", "name", "tags", "source_format", "origin", "origin_detail", "sample_count", "warnings", "summary",
    "created_at",
)  # fmt: skip
# ``summary`` left the run row in 0009 (run_summary): JSON, as it was.
RUN = sa.table(
    "run", *(sa.column(name, sa.JSON if name == "summary" else Run.__table__.c[name].type) for name in RUN_0001_COLUMNS)
)


def old_run(name: str, **values) -> dict:
    """The values of a run row at revision 0001: ``name`` and whatever ``values`` override."""
    return {
        "name": name, "tags": [], "source_format": "per-iteration-csv", "origin": "imported", "origin_detail": "",
        "sample_count": 1, "warnings": [], "summary": {}, "created_at": datetime(2026, 11, 21, 10, tzinfo=UTC),
        **values,
    }  # fmt: skip


def table_without(table: sa.Table, later: set[str]) -> sa.Table:
    """``table`` as the model has it, without the columns ``later`` revisions added."""
    columns = (sa.Column(c.name, c.type, primary_key=c.primary_key) for c in table.columns if c.name not in later)
    return sa.Table(table.name, sa.MetaData(), *columns)


# For migration tests at older revisions: 0012 added ``platform`` to run and plan, 0013 ``kind`` and
# ``peak_busbw_gbps`` to run, 0015 ``verdict``, 0017 what the list shows and people manage, 0018 what it sorts by,
# 0020 ``measured_at``. Each set holds the later ones too.
RUN_0020 = {"measured_at"}
RUN_0018 = {"first_collective", *RUN_0020}
RUN_0017 = {"collectives", "size_min_bytes", "size_max_bytes", "note", "facts", *RUN_0018}  # and later ones
RUN_BEFORE_0018 = table_without(Run.__table__, RUN_0018)
RUN_BEFORE_0017 = table_without(Run.__table__, RUN_0017)
RUN_BEFORE_0013 = table_without(Run.__table__, {"kind", "peak_busbw_gbps", "verdict", *RUN_0017})
RUN_BEFORE_0012 = table_without(Run.__table__, {"kind", "peak_busbw_gbps", "platform", "verdict", *RUN_0017})
PLAN_BEFORE_0012 = table_without(Plan.__table__, {"platform", "tags", "note"})
