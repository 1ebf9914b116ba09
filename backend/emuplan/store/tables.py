"""SQLModel tables. The schema itself is created by the Alembic migrations in ``migrations/``.

Large per-sample data is not stored one row per sample: a run's samples (and flows, for per-flow
uploads) are one Parquet blob each in ``run_table``, with the run's statistics cached in
``run_summary`` so that pages never re-read the blob. The ECDF grids and delay series that figures
draw (~300 KB of JSON per run) sit apart in ``run_curves``. The ``run`` row itself stays narrow (a few
hundred bytes: what lists show, the overall median and p99 as columns): a list pages through many
runs per database page instead of one (migration 0009).
"""

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Dialect,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    func,
    text,
)
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, Relationship, SQLModel


def utc_now() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator):
    """Every timestamp column: written as UTC, read back timezone-aware in UTC on every database.

    SQLite keeps no offset and hands back naive datetimes even for ``DateTime(timezone=True)``; since
    only UTC is ever written, a naive value read back is UTC. The schema type stays
    ``DateTime(timezone=True)``, so the migrations are unchanged.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None or value.tzinfo is not None:
            return value
        return value.replace(tzinfo=UTC)


def _created_at() -> Any:
    return Field(default_factory=utc_now, sa_column=Column(UTCDateTime, nullable=False))


# Every id and every column holding one is int64, as the API's ids are (``api.deps.DatabaseInt``):
# PostgreSQL's INTEGER is int32, so ids there are BIGINT (migration 0005); SQLite's INTEGER is int64
# already and must stay INTEGER, the type that makes a primary key the rowid.
DatabaseId = BigInteger().with_variant(Integer(), "sqlite")


def _id() -> Any:
    return Field(default=None, primary_key=True, sa_type=DatabaseId)


# Ids are never handed out twice (SQLite's AUTOINCREMENT; PostgreSQL sequences already behave so): a
# bookmarked page, a saved comparison or a share link never shows something it was not made with.
NEVER_REUSE_IDS = {"sqlite_autoincrement": True}


def _json(default_factory) -> Any:
    return Field(default_factory=default_factory, sa_column=Column(JSON, nullable=False))


# Columns added to tables that already had rows (migration 0016): the rows before it get the empty value.
def _added_json(default_factory, empty: str) -> Any:
    return Field(
        default_factory=default_factory, sa_column=Column(JSON, nullable=False, server_default=text(f"'{empty}'"))
    )


def _added_text() -> Any:
    return Field(default="", sa_column=Column(String, nullable=False, server_default=""))


class ModelDefinition(SQLModel, table=True):
    """A model a user uploaded (config.json, safetensors header, ONNX, PyTorch source) or a preset."""

    __tablename__ = "model_definition"
    __table_args__ = NEVER_REUSE_IDS

    id: int | None = _id()
    name: str
    source_kind: str  # preset | hf_config | safetensors | onnx | pytorch
    file_name: str | None = None
    content_sha256: str = Field(index=True)
    # The uploaded bytes (for a safetensors checkpoint only its header) so a plan can be recomputed.
    content: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    options: dict = _json(dict)  # how to read the content: model class, kwargs, input shape, ...
    inventory: dict = _json(dict)  # parameters and activations as the workload engine reads them
    parameter_count: int = Field(sa_column=Column(BigInteger, nullable=False))
    created_at: datetime = _created_at()


class Plan(SQLModel, table=True):
    """One stored KCCB run configuration: the inputs and the computed workload document."""

    __tablename__ = "plan"
    __table_args__ = NEVER_REUSE_IDS

    id: int | None = _id()
    name: str
    model_name: str
    model_definition_id: int | None = Field(
        default=None,
        sa_column=Column(DatabaseId, ForeignKey("model_definition.id", ondelete="SET NULL"), nullable=True),
    )
    strategy: str
    mode: str
    trials: int = Field(sa_type=BigInteger)
    inputs: dict = _json(dict)
    # The request as given (unset fields left out); None for plans stored before it was kept.
    request: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    workload: dict = _json(dict)
    # The platform's name (a built-in's or a stored profile's): see StoredPlatform.
    platform: str | None = None
    tags: list = _added_json(list, "[]")
    note: str = _added_text()
    created_at: datetime = _created_at()


class Run(SQLModel, table=True):
    """A set of measured collective completion times: imported from a file or measured locally."""

    __tablename__ = "run"
    # The lists' strategy filter compares lower(strategy) (migration 0008). ix_run_id is for SQLite only
    # (migration 0011): there the run table is its id's b-tree, so a list's page far from the newest
    # (OFFSET) would step over the skipped runs' whole rows; this index holds their ids alone, on far fewer pages.
    # PostgreSQL walks run_pkey, an index already: the same index there would only be a second copy.
    __table_args__ = (
        Index("ix_run_strategy_folded", func.lower(text("strategy"))),
        Index("ix_run_id", "id").ddl_if(dialect="sqlite"),
        # A platform's series, newest first, with or without a rank count (migration 0013, services.trend).
        Index("ix_run_platform_id", "platform", "id"),
        Index("ix_run_platform_ranks_id", "platform", "ranks", "id"),
        # The list's sorts other than by id (migration 0016): a sorted page reads its entries, not every row.
        Index("ix_run_name_id", "name", "id"),
        Index("ix_run_p50_id", "p50_us", "id"),
        Index("ix_run_peak_busbw_id", "peak_busbw_gbps", "id"),
        Index("ix_run_ranks_id", "ranks", "id"),
        Index("ix_run_size_max_id", "size_max_bytes", "id"),
        # By verdict (one walk per verdict), platform (ix_run_platform_id) and first collective (migration 0018).
        Index("ix_run_verdict_id", "verdict", "id"),
        Index("ix_run_first_collective_id", "first_collective", "id"),
        NEVER_REUSE_IDS,
    )

    id: int | None = _id()
    name: str
    plan_id: int | None = Field(
        default=None,
        sa_column=Column(DatabaseId, ForeignKey("plan.id", ondelete="SET NULL"), nullable=True, index=True),
    )
    strategy: str | None = None  # data | tensor | pipeline | hybrid
    tags: list = _json(list)
    source_format: str  # detected or declared format of the upload, e.g. nccl-tests, per-iteration-csv
    origin: str  # imported | measured | generated: shown to every reader, never guessed
    origin_detail: str = ""
    file_name: str | None = None
    content_sha256: str | None = Field(default=None, index=True)
    sample_count: int = Field(default=0, sa_type=BigInteger)
    ranks: int | None = Field(default=None, sa_type=BigInteger)
    hosts: int | None = Field(default=None, sa_type=BigInteger)
    warnings: list = _json(list)
    # How every view reads the run (``results.analysis.run_analysis.run_kind``, decided at import; migration 0012):
    # size-sweep | distribution.
    kind: str = Field(sa_column=Column(String, nullable=False))
    # The overall median and p99 (µs) of the cached statistics, and a sweep's peak busbw (GB/s): the figures
    # lists show (p50 for a distribution, peak busbw for a sweep), read with the row.
    p50_us: float | None = None
    p99_us: float | None = None
    # What it ran on: a platform's name, a built-in's or a stored profile's (see StoredPlatform).
    platform: str | None = None
    peak_busbw_gbps: float | None = None
    # When it was measured, where the file or the user says (0020); a series orders its runs by it, else by
    # ``created_at``, so that a log imported late lands where it belongs.
    measured_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))
    # pass | degraded | fail | not judged (results.analysis.verdict), stored so lists show it without reading statistics
    # (0015).
    verdict: str | None = None
    # What the list shows of the statistics beside the headline (0016): the collectives in the order of the
    # groups and the range of data sizes.
    collectives: list = _added_json(list, "[]")
    # The first of them, which the list sorts by (0018): the list's cell starts with it.
    first_collective: str | None = None
    size_min_bytes: int | None = Field(default=None, sa_type=BigInteger)
    size_max_bytes: int | None = Field(default=None, sa_type=BigInteger)
    note: str = _added_text()
    # Free-form fabric facts, key → value as given (topology, NIC, switch, firmware, NCCL version); case-folded
    # in ``run_fact`` for the list's filter.
    facts: dict = _added_json(dict, "{}")
    created_at: datetime = _created_at()
    cached_summary: "CachedSummary" = Relationship(
        sa_relationship_kwargs={"uselist": False, "lazy": "joined", "cascade": "all, delete-orphan"}
    )

    @property
    def summary(self) -> dict:
        """The cached statistics per group, computed once at import (curves in ``RunCurves``)."""
        return self.cached_summary.summary


class CachedSummary(SQLModel, table=True):
    """A run's statistics (``results.analysis.stats.summarise`` without the curves, ~8 KB of JSON): beside the
    run row, so that lists, which never read them, page through narrow rows."""

    __tablename__ = "run_summary"

    run_id: int | None = Field(
        default=None, sa_column=Column(DatabaseId, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True)
    )
    summary: dict = _json(dict)


class RunTag(SQLModel, table=True):
    """One tag of a run, case-folded: what the lists' tag filter looks up through ``ix_run_tag_folded``
    (``run.tags`` keeps the tags as given, for display)."""

    __tablename__ = "run_tag"
    __table_args__ = (Index("ix_run_tag_folded", "folded_tag", "run_id"),)

    run_id: int = Field(sa_column=Column(DatabaseId, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True))
    folded_tag: str = Field(sa_column=Column(String, primary_key=True))


class RunFact(SQLModel, table=True):
    """One fabric fact of a run, case-folded: what the list's fact filter looks up through ``ix_run_fact_folded``
    (``run.facts`` keeps them as given, for display and export)."""

    __tablename__ = "run_fact"
    __table_args__ = (Index("ix_run_fact_folded", "folded_key", "folded_value", "run_id"),)

    run_id: int = Field(sa_column=Column(DatabaseId, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True))
    folded_key: str = Field(sa_column=Column(String, primary_key=True))
    folded_value: str = Field(sa_column=Column(String, nullable=False))


class RunCollective(SQLModel, table=True):
    """One collective of a run (``run.collectives`` keeps them in order, for display): what the list's collective
    filter looks up through ``ix_run_collective`` (migration 0016)."""

    __tablename__ = "run_collective"
    __table_args__ = (Index("ix_run_collective", "collective", "run_id"),)

    run_id: int = Field(sa_column=Column(DatabaseId, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True))
    collective: str = Field(sa_column=Column(String, primary_key=True))


class RunTrendFigures(SQLModel, table=True):
    """What a series reads of a run (``services.series_figures.figures_of``: per collective its peak and average
    busbw and busbw per size, 0.6 KB of JSON for a 31-size sweep), written with its summary: a series page reads
    these, not 30 summaries of 56 KB."""

    __tablename__ = "run_trend_figures"

    run_id: int = Field(sa_column=Column(DatabaseId, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True))
    figures: dict = _json(dict)


class RunCurves(SQLModel, table=True):
    """A run's whole summary, ECDF grids and delay series included: read by figures and comparisons only."""

    __tablename__ = "run_curves"

    run_id: int = Field(sa_column=Column(DatabaseId, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True))
    summary: dict = _json(dict)


class RunTable(SQLModel, table=True):
    """A run's columnar data (Arrow/Parquet bytes): ``samples`` always, ``flows`` for per-flow uploads,
    ``rank_times`` for files that time every rank (``results.canonical.RANK_TIMES_SCHEMA``)."""

    __tablename__ = "run_table"

    run_id: int = Field(sa_column=Column(DatabaseId, ForeignKey("run.id", ondelete="CASCADE"), primary_key=True))
    kind: str = Field(primary_key=True)
    row_count: int = Field(sa_column=Column(BigInteger, nullable=False))
    parquet: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class StoredPlatform(SQLModel, table=True):
    """A platform profile a user added (``workload.platforms.Platform``'s fields); the built-in ones live in the
    code. Runs and plans name a platform by its name, not by this id, so that built-ins can be named too."""

    __tablename__ = "platform"
    __table_args__ = NEVER_REUSE_IDS

    id: int | None = _id()
    name: str = Field(unique=True)
    title: str
    gpu_model: str
    gpus_per_node: int
    scale_up_domain_gpus: int
    scale_up_fabric: str
    scale_up_gb_s: float
    scale_out_fabric: str
    nics_per_node: int
    nic_gbit_s: float
    gpu_generation: str
    scale_up_link: str
    nvls: bool
    degraded_below_pct: float
    fail_below_pct: float
    sources: list = _json(list)
    created_at: datetime = _created_at()
    updated_at: datetime = _created_at()


class Comparison(SQLModel, table=True):
    """A saved side-by-side view of several runs, with the baseline and chart options."""

    __tablename__ = "comparison"
    __table_args__ = NEVER_REUSE_IDS

    id: int | None = _id()
    name: str
    run_ids: list = _json(list)
    baseline_run_id: int | None = Field(default=None, sa_type=DatabaseId)
    options: dict = _json(dict)
    tags: list = _added_json(list, "[]")
    note: str = _added_text()
    created_at: datetime = _created_at()


class ShareLink(SQLModel, table=True):
    """A read-only link to one comparison. Only the SHA-256 of the token is kept."""

    __tablename__ = "share_link"
    __table_args__ = NEVER_REUSE_IDS

    id: int | None = _id()
    comparison_id: int = Field(
        sa_column=Column(DatabaseId, ForeignKey("comparison.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    token_hash: str = Field(unique=True)
    # Whom or what it was made for ("vendor review"): the token itself is never shown again.
    label: str = _added_text()
    created_at: datetime = _created_at()
    expires_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))
    revoked_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))


class Account(SQLModel, table=True):
    """Someone who signs in when ``EMUPLAN_AUTH=accounts``: a name, an Argon2 password hash and a role."""

    __tablename__ = "account"
    __table_args__ = NEVER_REUSE_IDS

    id: int | None = _id()
    name: str = Field(unique=True)
    role: str  # viewer | editor | admin (emuplan.roles.Role)
    password_hash: str
    created_at: datetime = _created_at()


def _account_id() -> Any:
    # Removing an account ends its sessions and tokens with it.
    return Field(sa_column=Column(DatabaseId, ForeignKey("account.id", ondelete="CASCADE"), nullable=False, index=True))


class AccountSession(SQLModel, table=True):
    """A signed-in browser. The cookie carries a random id; only its SHA-256 is kept here, so a copy of
    the database signs nobody in, and deleting the row (sign-out, account removed) ends the session."""

    __tablename__ = "account_session"
    __table_args__ = NEVER_REUSE_IDS

    id: int | None = _id()
    account_id: int = _account_id()
    token_hash: str = Field(unique=True)
    created_at: datetime = _created_at()
    expires_at: datetime = Field(sa_column=Column(UTCDateTime, nullable=False))


class ApiToken(SQLModel, table=True):
    """A token for scripts and the CLI (``Authorization: Bearer``): shown once, only its SHA-256 kept."""

    __tablename__ = "api_token"
    __table_args__ = NEVER_REUSE_IDS

    id: int | None = _id()
    account_id: int = _account_id()
    label: str
    token_hash: str = Field(unique=True)
    created_at: datetime = _created_at()
    expires_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))
    revoked_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))


class SignInFailure(SQLModel, table=True):
    """One refused sign-in, counted per account name and per address to slow down password guessing.
    Kept in the database so that every worker and instance counts the same failures."""

    __tablename__ = "sign_in_failure"

    id: int | None = _id()
    account_name: str = Field(index=True)
    address: str = Field(index=True)
    failed_at: datetime = Field(default_factory=utc_now, sa_column=Column(UTCDateTime, nullable=False, index=True))


class JobRecord(SQLModel, table=True):
    """A long task run in the background (``services/jobs/``: a measurement, a simulation, a relabelling), run
    on a thread of one server worker and reported and cancelled by all of them (migration 0021).

    ``kind`` names what it runs; ``plan_id`` or ``run_id`` what it works on. The running worker writes
    ``state``, ``progress`` and ``heartbeat_at`` and, at the end, ``result`` or ``error``; it reads
    ``cancel_requested``, which any worker may set. ``holds`` names, while the job is active, the one thing
    only one job may hold at a time (the host a measurement runs on, the run a relabelling changes): UNIQUE,
    so a second start fails at the insert, atomically on SQLite and PostgreSQL alike; NULL once it ended.
    """

    __tablename__ = "job"

    id: str = Field(primary_key=True)
    kind: str = Field(index=True)
    plan_id: int | None = Field(default=None, sa_type=BigInteger)
    run_id: int | None = Field(default=None, sa_type=BigInteger)
    request: dict = _json(dict)  # what was asked for, defaults filled in
    state: str
    progress: dict = _json(dict)  # the kind's counters, e.g. {"ranks_done": 3, "ranks_total": 8}
    error: str | None = None
    result: dict | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    host: str  # the server host whose worker runs it
    holds: str | None = Field(default=None, unique=True)
    cancel_requested: bool = False
    heartbeat_at: datetime = _created_at()
    started_at: datetime = Field(default_factory=utc_now, sa_column=Column(UTCDateTime, nullable=False, index=True))
    finished_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime, nullable=True))
