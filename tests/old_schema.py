"""Tables as the first migration made them, for migration tests that fill a database at an old
revision (the models' own tables would name columns added later)."""

from datetime import UTC, datetime

import sqlalchemy as sa

from emuplan.store.models import Run

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


# The run table from 0010 to 0011, for migration tests at those revisions: ``kind`` and ``peak_busbw_gbps``
# came in 0012.
RUN_BEFORE_0012 = sa.Table(
    "run",
    sa.MetaData(),
    *(
        sa.Column(column.name, column.type, primary_key=column.primary_key)
        for column in Run.__table__.columns
        if column.name not in ("kind", "peak_busbw_gbps")
    ),
)
