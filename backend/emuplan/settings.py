"""Runtime settings, read from environment variables with the ``EMUPLAN_`` prefix."""

import ipaddress
import socket
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from emuplan.measure.options import DEFAULT_MEMORY_MB as DEFAULT_MEASURE_MEMORY_MB
from emuplan.simulate.options import DEFAULT_MEMORY_MB as DEFAULT_SIMULATOR_MEMORY_MB

PACKAGE_DIR = Path(__file__).resolve().parent
# backend/emuplan/settings.py -> in a checkout, the repository root holds frontend/ and migrations/.
REPO_ROOT = PACKAGE_DIR.parents[1]


def bundled_dir(name: str) -> Path:
    """``frontend`` or ``migrations``: inside the package when installed from a wheel (pyproject's
    force-include puts them there), else at the top of the checkout (an editable install)."""
    inside = PACKAGE_DIR / name
    return inside if inside.is_dir() else REPO_ROOT / name


FRONTEND_DIR = bundled_dir("frontend")
MIGRATIONS_DIR = bundled_dir("migrations")


# The names every local user types; a server bound to all interfaces also answers to the machine's name.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = ("0.0.0.0", "::", "")


def default_allowed_hosts(bind_host: str) -> list[str]:
    names = [bind_host] if bind_host not in WILDCARD_ADDRESSES else [socket.gethostname(), socket.getfqdn()]
    return list(dict.fromkeys([*names, *LOOPBACK_NAMES]))


def is_loopback(host: str) -> bool:
    """Whether an address (to listen on, or a client's) is this machine only: ``localhost``, 127.0.0.0/8, ::1."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:  # a host name: it resolves to whatever the network says
        return False
    # A dual-stack socket on :: sees IPv4 clients as ::ffff:a.b.c.d, which Python 3.11 does not call loopback.
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback


def _default_database_url() -> str:
    return f"sqlite:///{Path.cwd() / 'data' / 'emuplan.sqlite3'}"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EMUPLAN_", env_file=None, extra="ignore")

    database_url: str = Field(
        default_factory=_default_database_url,
        description="SQLAlchemy URL; a SQLite file under ./data by default, PostgreSQL when one host is not enough.",
    )
    host: str = Field(default="127.0.0.1", description="Address `emuplan serve` binds to.")
    port: int = Field(default=8000, description="Port `emuplan serve` listens on.")
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host names the server answers to, comma-separated ('*': any). Default: EMUPLAN_HOST "
        "(the machine's name when that is 0.0.0.0 or ::) plus localhost, 127.0.0.1 and ::1.",
    )
    auth: Literal["none", "accounts"] = Field(
        default="none",
        description="'none': no sign-in, whoever reaches the port may do everything (hence the localhost "
        "default bind). 'accounts': sign-in with roles viewer, editor and admin (emuplan users add).",
    )
    open_without_sign_in: bool = Field(
        default=False,
        description="Let `emuplan serve` listen beyond loopback, or answer to every host name "
        "(EMUPLAN_ALLOWED_HOSTS=*), with sign-in off (EMUPLAN_AUTH=none), so that everyone who reaches the port may "
        "do everything. Refused unless this is true.",
    )
    session_days: float = Field(default=14.0, gt=0, le=3650, description="How long a browser stays signed in.")
    password_change_signs_out: bool = Field(
        default=True,
        description="A password change (on /account, or an admin's reset) ends the account's other sessions and "
        "revokes its API tokens: whoever knew the old password is out everywhere.",
    )
    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Addresses or networks of the reverse proxies in front of the server, comma-separated "
        "(e.g. 127.0.0.1,10.0.0.0/8). Only a request from one of them has its X-Forwarded-For (the client "
        "address sign-in limits count) and X-Forwarded-Proto believed. Default: none, every client is itself.",
    )
    demo: bool = Field(
        default=True, description="Load the demo plans, runs and comparison on start into a database that holds none."
    )
    # Uploads stream to a temporary file and are parsed from there, so memory does not grow with this limit
    # (it grows with the parsed table): 1 GiB takes a 10M-row per-iteration CSV (~600 MB) with room to spare.
    max_upload_bytes: int = Field(
        default=1024 * 1024 * 1024, description="Largest upload accepted, counted while streaming."
    )
    max_decompressed_bytes: int = Field(
        default=2 * 1024 * 1024 * 1024,
        gt=0,
        description="Cap on what one import decompresses: gzip, Arrow IPC/Feather's LZ4/ZSTD buffers, Parquet pages.",
    )
    # An import holds its rows whatever the file's width (~80 bytes each): 20 M rows is ~1.6 GB.
    max_import_rows: int = Field(default=20_000_000, gt=0, description="Cap on the rows of one imported file.")
    # About 15 µs of a core per event (bench/bench_trace_parse.py): a million is ~15 s.
    max_trace_events: int = Field(
        default=1_000_000, gt=0, description="Cap on the events (traceEvents) of one PyTorch profiler trace."
    )
    max_archive_members: int = Field(
        default=10_000,
        gt=0,
        description="Cap on the members of one zip or tar upload (each charged ~32 KB against the import's memory).",
    )
    import_memory_bytes: int = Field(
        default=3 * 1024 * 1024 * 1024,
        gt=0,
        description="Memory all imports in flight may hold together; an upload beyond it gets 503 with Retry-After.",
    )
    streamed_import_above_bytes: int = Field(
        default=256 * 1024 * 1024,
        gt=0,
        description="A per-iteration or per-flow table (CSV, gzip CSV, Feather, Parquet) larger than this on disk or "
        "decompressed is imported streamed, in bounded memory.",
    )
    streamed_import_memory_bytes: int = Field(
        default=1024 * 1024 * 1024,
        # Below ~200 MB DuckDB's sort of a few million rows runs out of its share even spilling (measured).
        ge=256 * 1024 * 1024,
        description="Memory one streamed import holds at most, whatever the file's size (counted in the shared pool).",
    )
    sandbox_allow_unsandboxed: bool = Field(
        default=False,
        description="Run uploaded Python in a plain subprocess when bubblewrap is missing. Unsafe: trusted users only.",
    )
    sandbox_timeout_s: float = Field(default=60.0, description="Wall-clock limit for one sandboxed model run.")
    sandbox_memory_mb: int = Field(default=4096, description="Address-space limit for one sandboxed model run.")
    assumed_link_gbps: float = Field(
        default=100.0, gt=0, description="Link speed per rank (Gbit/s) for ideal times when no plan is linked."
    )
    assumed_latency_us: float = Field(
        default=5.0, ge=0, description="Latency α (µs) for ideal times when no plan is linked."
    )
    metrics_public: bool = Field(
        default=False,
        description="Let anyone read GET /metrics (Prometheus) without signing in; when false and sign-in is on, "
        "a scraper sends a viewer's API token as 'Authorization: Bearer TOKEN'.",
    )
    metrics_max_series: int = Field(
        default=2000,
        gt=0,
        description="Series one GET /metrics scrape exposes at most (5 samples each); those left out are counted in "
        "emuplan_metrics_series_dropped.",
    )
    astra_sim: Path | None = Field(
        default=None,
        description="ASTRA-sim's analytical binary (AstraSim_Analytical_Congestion_Unaware): plans can be simulated "
        "when it is set. An external tool the user builds; docs/simulating.md says how.",
    )
    simulator_memory_mb: int = Field(
        default=DEFAULT_SIMULATOR_MEMORY_MB,
        ge=64,
        description="Memory ASTRA-sim may write to (RLIMIT_DATA), MB; a plan whose estimated simulator memory passes "
        "it is refused before it starts (422, with the estimate).",
    )
    measure_memory_mb: int = Field(
        default=DEFAULT_MEASURE_MEMORY_MB,
        ge=256,
        description="Memory each measurement worker may write to (RLIMIT_DATA), MB: the collectives' buffers, torch "
        "and the backend's own (CUDA's reserved address space does not count).",
    )
    frontend_dir: Path = Field(default=FRONTEND_DIR, description="Templates and static files.")
    migrations_dir: Path = Field(default=MIGRATIONS_DIR, description="Alembic scripts.")

    @field_validator("allowed_hosts", "trusted_proxies", mode="before")
    @classmethod
    def _split_names(cls, value: object) -> object:
        return [name.strip() for name in value.split(",") if name.strip()] if isinstance(value, str) else value

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an IP address or network (e.g. 10.0.0.0/8)") from None
        return value

    # The loopback names the default adds (not the operator): they mean this machine, so they are served to its
    # own connections only (api/request_guard.py); a browser elsewhere that types localhost reaches its own machine.
    _local_only_hosts: frozenset[str] = PrivateAttr(default=frozenset())

    @model_validator(mode="after")
    def _default_names(self) -> "Settings":
        if not self.allowed_hosts:
            self.allowed_hosts = default_allowed_hosts(self.host)
            self._local_only_hosts = frozenset(name for name in self.allowed_hosts if is_loopback(name))
        return self

    @property
    def local_only_hosts(self) -> frozenset[str]:
        return self._local_only_hosts


def open_listener_refusal(settings: Settings, bind_host: str) -> str | None:
    """Why `serve` must not start so, or None: with sign-in off, anyone who reaches the port may upload code to
    the sandbox and delete every run, so only this machine may reach it by default, under names it chose."""
    if settings.auth == "accounts" or settings.open_without_sign_in:
        return None
    if not is_loopback(bind_host):
        return (
            f"refusing to listen on {bind_host} with sign-in off (EMUPLAN_AUTH=none): everyone who reaches the port "
            "could do everything. Turn sign-in on (EMUPLAN_AUTH=accounts, then `emuplan users add NAME --role "
            "admin`), listen on 127.0.0.1 (--host), or accept it with EMUPLAN_OPEN_WITHOUT_SIGN_IN=true."
        )
    if "*" in settings.allowed_hosts:
        # A page open in a browser here can point a name of its own at 127.0.0.1 (DNS rebinding): its requests
        # are then same-origin, so only the Host check keeps it out.
        return (
            "refusing to answer to every host name (EMUPLAN_ALLOWED_HOSTS=*) with sign-in off (EMUPLAN_AUTH=none): "
            "any web page open on this machine could rename itself to this server and do everything. List the names "
            "you type in EMUPLAN_ALLOWED_HOSTS, turn sign-in on (EMUPLAN_AUTH=accounts), or accept it with "
            "EMUPLAN_OPEN_WITHOUT_SIGN_IN=true."
        )
    return None


@lru_cache
def get_settings() -> Settings:
    return Settings()
