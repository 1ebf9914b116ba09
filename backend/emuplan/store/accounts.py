"""Accounts, sign-in sessions and API tokens (used when ``EMUPLAN_AUTH=accounts``).

Passwords are hashed with Argon2id (argon2-cffi's defaults). Session ids and API tokens are 256-bit
random strings of which the database keeps only the SHA-256, like share links: a copy of the database
signs nobody in. A session or token is a row, so signing out, revoking a token or removing an account
takes effect on the next request of every worker.

Failed sign-ins are rows too, counted per account name and per address over a sliding window, so every
worker refuses the same guesses.
"""

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import bindparam
from sqlmodel import Session, col, delete, func, select

from emuplan.roles import Role
from emuplan.store.credentials import credential_state, hash_token, new_secret, revoke
from emuplan.store.models import Account, AccountSession, ApiToken, SignInFailure, utc_now
from emuplan.store.rows import NotFound

# Ten refusals for one account name or thirty from one address within 15 minutes hold further tries off
# until the oldest of them is 15 minutes old: a guesser gets 40 tries an hour per account.
FAILURE_WINDOW = timedelta(minutes=15)
MAX_FAILURES_PER_ACCOUNT = 10
MAX_FAILURES_PER_ADDRESS = 30
MAX_NAME_LENGTH = 64
MAX_LABEL_LENGTH = 100
MAX_TOKEN_DAYS = 3650
API_TOKEN_PREFIX = "emu_"

_hasher = PasswordHasher()
# Verified when the name is unknown, so a wrong name takes as long as a wrong password.
_UNKNOWN_ACCOUNT_HASH = _hasher.hash(secrets.token_urlsafe(16))


class AccountNotFound(NotFound):
    pass


class ApiTokenNotFound(NotFound):
    pass


class AccountExists(ValueError):
    pass


class SignInRefused(Exception):
    """A wrong name or password: HTTP 401. The message never says which of the two was wrong."""


class SignInRateLimited(Exception):
    """Too many recent failures for this account or address: HTTP 429 with Retry-After."""

    def __init__(self, message: str, retry_after_s: int):
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class SignedIn:
    """Who a request comes from: the account and how it proved it (a session cookie or an API token)."""

    account_id: int
    name: str
    role: Role
    via: str  # session | token


def _valid_name(name: str) -> str:
    name = name.strip()
    if not name or len(name) > MAX_NAME_LENGTH or not name.isprintable() or " " in name:
        raise ValueError(f"name: {name!r} must be 1 to {MAX_NAME_LENGTH} printable characters without spaces")
    return name


def find_account(session: Session, name: str) -> Account | None:
    return session.exec(select(Account).where(Account.name == name)).first()


def get_account(session: Session, name: str) -> Account:
    account = find_account(session, name)
    if account is None:
        raise AccountNotFound(f"no account named {name!r}")
    return account


def create_account(session: Session, name: str, role: Role) -> tuple[Account, str]:
    """A new account and its password (random, shown once to whoever hands it over)."""
    name = _valid_name(name)
    if find_account(session, name) is not None:
        raise AccountExists(f"name: an account named {name!r} exists already")
    password = secrets.token_urlsafe(12)
    account = Account(name=name, role=Role(role).value, password_hash=_hasher.hash(password))
    session.add(account)
    session.flush()
    return account, password


def list_accounts(session: Session) -> list[Account]:
    return list(session.exec(select(Account).order_by(col(Account.name))).all())


def set_role(session: Session, name: str, role: Role) -> Account:
    account = get_account(session, name)
    account.role = Role(role).value
    session.add(account)
    return account


def remove_account(session: Session, name: str) -> None:
    """The account, its sessions and its tokens (signed-in browsers are signed out at once)."""
    account = get_account(session, name)
    session.exec(delete(AccountSession).where(col(AccountSession.account_id) == account.id))
    session.exec(delete(ApiToken).where(col(ApiToken.account_id) == account.id))
    session.delete(account)


def change_password(session: Session, account_id: int, current: str, new: str) -> None:
    account = session.get(Account, account_id)
    if account is None or not _password_matches(account.password_hash, current):
        raise ValueError("current password: that is not your password")
    if len(new) < 12:
        raise ValueError("new password: use at least 12 characters")
    account.password_hash = _hasher.hash(new)
    session.add(account)


def _password_matches(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _recent_failures(session: Session, column, value: str, since: datetime) -> tuple[int, datetime | None]:
    statement = select(func.count(), func.min(SignInFailure.failed_at)).where(
        column == value, col(SignInFailure.failed_at) > since
    )
    count, oldest = session.exec(statement).one()
    return count, oldest


def _refuse_if_rate_limited(session: Session, name: str, address: str, now: datetime) -> None:
    since = now - FAILURE_WINDOW
    for column, value, limit, what in (
        (col(SignInFailure.account_name), name, MAX_FAILURES_PER_ACCOUNT, "this account"),
        (col(SignInFailure.address), address, MAX_FAILURES_PER_ADDRESS, "your address"),
    ):
        count, oldest = _recent_failures(session, column, value, since)
        if count >= limit:
            wait = max(1, int((oldest + FAILURE_WINDOW - now).total_seconds()) + 1)
            raise SignInRateLimited(
                f"Too many failed sign-ins for {what}: {count} in {FAILURE_WINDOW.seconds // 60} minutes. "
                f"Try again in {wait} s.",
                wait,
            )


def record_failure(session: Session, name: str, address: str) -> None:
    """Counted in its own transaction by the caller, so that it stays when the sign-in is refused."""
    now = utc_now()
    session.exec(delete(SignInFailure).where(col(SignInFailure.failed_at) < now - FAILURE_WINDOW))
    session.add(SignInFailure(account_name=name[:MAX_NAME_LENGTH], address=address, failed_at=now))


def check_password(session: Session, name: str, password: str, address: str) -> Account:
    """The account when ``password`` is its password and neither the name nor the address is held off.

    Raises ``SignInRateLimited`` before looking at the password (a correct guess during the hold-off
    is refused too), and ``SignInRefused`` on a wrong name or password: the caller records that failure.
    """
    _refuse_if_rate_limited(session, name, address, utc_now())
    account = find_account(session, name)
    if account is None:
        _password_matches(_UNKNOWN_ACCOUNT_HASH, password)
        raise SignInRefused("Wrong name or password.")
    if not _password_matches(account.password_hash, password):
        raise SignInRefused("Wrong name or password.")
    return account


def start_session(session: Session, account: Account, lifetime: timedelta) -> str:
    """A new session for ``account``; returns the cookie value (kept nowhere else)."""
    secret = new_secret()
    now = utc_now()
    session.exec(delete(AccountSession).where(col(AccountSession.expires_at) < now))
    session.add(AccountSession(account_id=account.id, token_hash=hash_token(secret), expires_at=now + lifetime))
    session.exec(delete(SignInFailure).where(col(SignInFailure.account_name) == account.name))
    return secret


def end_session(session: Session, secret: str) -> None:
    session.exec(delete(AccountSession).where(col(AccountSession.token_hash) == hash_token(secret)))


# What every signed-in request reads of its account: these columns, not the rows as objects, in a statement
# built once (loading an Account and an ApiToken took ~0.35 ms of each request and building the statement
# ~0.15 ms, more than the page behind it spends on its list; ~0.1 ms now).
_WHO = (Account.id, Account.name, Account.role)
_SESSION_OWNER = (
    select(*_WHO, AccountSession.expires_at)
    .join(AccountSession, col(AccountSession.account_id) == col(Account.id))
    .where(AccountSession.token_hash == bindparam("token_hash"))
)
_TOKEN_OWNER = (
    select(*_WHO, ApiToken.revoked_at, ApiToken.expires_at)
    .join(ApiToken, col(ApiToken.account_id) == col(Account.id))
    .where(ApiToken.token_hash == bindparam("token_hash"))
)


def _signed_in(row, via: str) -> SignedIn:
    return SignedIn(account_id=row.id, name=row.name, role=Role(row.role), via=via)


def resolve_session(session: Session, secret: str) -> SignedIn | None:
    """The account of a live session cookie; None for an unknown, ended or expired one."""
    row = session.exec(_SESSION_OWNER, params={"token_hash": hash_token(secret)}).first()
    if row is None or row.expires_at <= utc_now():
        return None
    return _signed_in(row, "session")


def create_api_token(
    session: Session, account_id: int, label: str, expires_in_days: float | None
) -> tuple[ApiToken, str]:
    """A new token for scripts and the CLI; returns the row and the token (shown once)."""
    label = label.strip()
    if not label or len(label) > MAX_LABEL_LENGTH:
        raise ValueError(f"label: say what the token is for, in 1 to {MAX_LABEL_LENGTH} characters")
    if expires_in_days is not None and not 0 < expires_in_days <= MAX_TOKEN_DAYS:
        raise ValueError(f"expires_in_days: must be more than 0 and at most {MAX_TOKEN_DAYS}")
    secret = API_TOKEN_PREFIX + new_secret()
    now = utc_now()
    token = ApiToken(
        account_id=account_id,
        label=label,
        token_hash=hash_token(secret),
        created_at=now,
        expires_at=None if expires_in_days is None else now + timedelta(days=expires_in_days),
    )
    session.add(token)
    session.flush()
    return token, secret


def list_api_tokens(session: Session, account_id: int) -> list[ApiToken]:
    statement = select(ApiToken).where(ApiToken.account_id == account_id).order_by(col(ApiToken.id).desc())
    return list(session.exec(statement).all())


def revoke_api_token(session: Session, account_id: int, token_id: int) -> ApiToken:
    token = session.get(ApiToken, token_id)
    if token is None or token.account_id != account_id:
        raise ApiTokenNotFound(f"you have no API token with id {token_id}")
    revoke(session, token)
    return token


def resolve_api_token(session: Session, secret: str) -> SignedIn | None:
    """The account of an active API token; None for an unknown, revoked or expired one."""
    row = session.exec(_TOKEN_OWNER, params={"token_hash": hash_token(secret)}).first()
    if row is None or credential_state(row) != "active":
        return None
    return _signed_in(row, "token")


def api_token_document(token: ApiToken) -> dict:
    return {
        "id": token.id,
        "label": token.label,
        "created_at": token.created_at,
        "expires_at": token.expires_at,
        "revoked_at": token.revoked_at,
        "state": credential_state(token),
    }
