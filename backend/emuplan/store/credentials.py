"""What share links, sign-in sessions and API tokens have in common: a random secret shown once, kept
only as its SHA-256, and a row that may expire or be revoked."""

import hashlib
import secrets
from datetime import datetime
from typing import Protocol

from sqlmodel import Session

from emuplan.store.tables import utc_now

# 32 random bytes: 256 bits, well above the 128 the product promises; 43 URL-safe characters.
TOKEN_BYTES = 32


class Revocable(Protocol):
    expires_at: datetime | None
    revoked_at: datetime | None


def new_secret() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def credential_state(row: Revocable, now: datetime | None = None) -> str:
    """active | expired | revoked"""
    if row.revoked_at is not None:
        return "revoked"
    if row.expires_at is not None and row.expires_at <= (now or utc_now()):
        return "expired"
    return "active"


def revoke(session: Session, row: Revocable) -> None:
    """Stamp ``revoked_at`` once: the row stays, so its owner still sees when it stopped working."""
    if row.revoked_at is None:
        row.revoked_at = utc_now()
        session.add(row)
        session.flush()
