"""Runtime settings, read from environment variables with the ``EMUPLAN_`` prefix."""

import socket
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

# backend/emuplan/settings.py -> the repository root holds frontend/ and migrations/.
REPO_ROOT = Path(__file__).resolve().parents[2]


# The names every local user types; a server bound to all interfaces also answers to the machine's name.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARD_ADDRESSES = ("0.0.0.0", "::", "")


def default_allowed_hosts(bind_host: str) -> list[str]:
    names = [bind_host] if bind_host not in WILDCARD_ADDRESSES else [socket.gethostname(), socket.getfqdn()]
    return list(dict.fromkeys([*names, *LOOPBACK_NAMES]))


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
    session_days: float = Field(default=14.0, gt=0, le=3650, description="How long a browser stays signed in.")
    demo: bool = Field(default=True, description="Load the demo plans and runs on start when they are missing.")
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
    import_memory_bytes: int = Field(
        default=3 * 1024 * 1024 * 1024,
        gt=0,
        description="Memory all imports in flight may hold together; an upload beyond it gets 503 with Retry-After.",
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
    frontend_dir: Path = Field(default=REPO_ROOT / "frontend", description="Templates and static files.")
    migrations_dir: Path = Field(default=REPO_ROOT / "migrations", description="Alembic scripts.")

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _split_names(cls, value: object) -> object:
        return [name.strip() for name in value.split(",") if name.strip()] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _default_names(self) -> "Settings":
        if not self.allowed_hosts:
            self.allowed_hosts = default_allowed_hosts(self.host)
        return self


@lru_cache
def get_settings() -> Settings:
    return Settings()
