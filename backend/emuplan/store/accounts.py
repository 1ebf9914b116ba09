"""Accounts, sign-in sessions and API tokens (used when ``EMUPLAN_AUTH=accounts``).

Passwords are hashed with Argon2id (argon2-cffi's defaults). Session ids and API tokens are 256-bit
random strings of which the database keeps only the SHA-256, like share links: a copy of the database
signs nobody in. A session or token is a row, so signing out, revoking a token or removing an account
takes effect on the next request of every worker.

Failed sign-ins are rows too, counted per address and per account name over a sliding window, so every
worker refuses the same guesses. They hold further tries off by delays that grow with each failure, never
by a lock: the account's owner, signing in from an address that has not failed, is let in at once however
many guesses others made. The password is checked outside any transaction (``check_password`` is pure
CPU), so a flood of guesses never holds the database's write lock while Argon2 runs.
"""

import ipaddress
import math
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlalchemy import bindparam, or_
from sqlmodel import Session, col, delete, func, select

from emuplan.errors import EmuplanError
from emuplan.roles import Role
from emuplan.store.credentials import credential_state, hash_token, new_secret, revoke
from emuplan.store.rows import NotFound
from emuplan.store.tables import Account, AccountSession, ApiToken, SignInFailure, utc_now

# Failures are remembered for 15 minutes. An address's first 10 failures (at any names) cost nothing, and
# its first 3 at one account; each failure past those holds the address off for 1 s, then 2, 4, 8 … up to
# 15 minutes. Once an account has failed 10 times from anywhere it is under attack: every address that
# fails at it waits from its first failure there on, so a guesser needs a new address for every guess or
# two, while an address that has not failed (the owner's) goes straight in.
FAILURE_WINDOW = timedelta(minutes=15)
FREE_FAILURES_PER_ADDRESS = 10
FREE_FAILURES_PER_ACCOUNT_FROM_AN_ADDRESS = 3
ACCOUNT_UNDER_ATTACK = 10
MAX_WAIT = FAILURE_WINDOW
# An IPv6 host is handed a whole /64 and may use any address in it: counted one by one, each of its 2^64
# addresses would start with free failures and no wait. So an IPv6 address counts as its /64.
IPV6_PREFIX_COUNTED = 64
MIN_PASSWORD_LENGTH = 12
MAX_NAME_LENGTH = 64
# A name is a path segment of /api/accounts/{name}, shown in pages and logs: letters, digits and . _ @ + - as
# Django's user names, none leading with "." (".." reached the same URL as "%2e%2e") or "-" (an option to the CLI).
# "/", "%", "<" and spaces cannot be written.
NAME_PATTERN = re.compile(r"[\w@+][\w.@+-]*")
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


class AccountExists(EmuplanError, ValueError):
    http_status = 409


class LastAdmin(EmuplanError, ValueError):
    """Demoting or removing the only admin: nobody could manage accounts any more (HTTP 409)."""

    http_status = 409


class SignInRefused(EmuplanError):
    """A wrong name or password: HTTP 401. The message never says which of the two was wrong."""

    http_status = 401


class SignInRateLimited(EmuplanError):
    """Too many recent failures for this account or address: HTTP 429 with Retry-After."""

    http_status = 429

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
    if len(name) > MAX_NAME_LENGTH or not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"name: {name!r} must be 1 to {MAX_NAME_LENGTH} letters, digits or . _ @ + - (not starting with . or -)"
        )
    return name


def find_account(session: Session, name: str) -> Account | None:
    return session.exec(select(Account).where(Account.name == name)).first()


def get_account(session: Session, name: str) -> Account:
    account = find_account(session, name)
    if account is None:
        raise AccountNotFound(f"no account named {name!r}")
    return account


def new_password() -> str:
    """A random password for a new account or a reset (96 bits; shown once to whoever hands it over)."""
    return secrets.token_urlsafe(12)


def hash_password(password: str) -> str:
    """Argon2id, ~50 ms of CPU and 64 MiB: called before a write transaction opens, never inside one."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise ValueError(f"new password: use at least {MIN_PASSWORD_LENGTH} characters")
    return _hasher.hash(password)


def create_account(session: Session, name: str, role: Role) -> tuple[Account, str]:
    """A new account and its password (random, shown once to whoever hands it over). Hashed before the first
    statement: called first in a write session, it holds no lock while Argon2 runs."""
    name = _valid_name(name)
    password = new_password()
    account = Account(name=name, role=Role(role).value, password_hash=hash_password(password))
    if find_account(session, name) is not None:
        raise AccountExists(f"name: an account named {name!r} exists already")
    session.add(account)
    session.flush()
    return account, password


def list_accounts(session: Session) -> list[Account]:
    return list(session.exec(select(Account).order_by(col(Account.name))).all())


class ListedAccount(NamedTuple):
    """An account as an admin sees it in a list (never its password hash)."""

    name: str
    role: str
    created_at: datetime
    sessions: int  # browsers signed in now
    active_tokens: int


def listed_accounts(session: Session) -> list[ListedAccount]:
    now = utc_now()
    live_sessions = (
        select(AccountSession.account_id, func.count().label("sessions"))
        .where(col(AccountSession.expires_at) > now)
        .group_by(col(AccountSession.account_id))
        .subquery()
    )
    active_tokens = (
        select(ApiToken.account_id, func.count().label("tokens"))
        .where(
            col(ApiToken.revoked_at).is_(None), or_(col(ApiToken.expires_at).is_(None), col(ApiToken.expires_at) > now)
        )
        .group_by(col(ApiToken.account_id))
        .subquery()
    )
    statement = (
        select(
            Account.name,
            Account.role,
            Account.created_at,
            func.coalesce(live_sessions.c.sessions, 0),
            func.coalesce(active_tokens.c.tokens, 0),
        )
        .outerjoin(live_sessions, live_sessions.c.account_id == col(Account.id))
        .outerjoin(active_tokens, active_tokens.c.account_id == col(Account.id))
        .order_by(col(Account.name))
    )
    return [ListedAccount(*row) for row in session.exec(statement).all()]


def listed_account(session: Session, name: str) -> ListedAccount:
    get_account(session, name)
    return next(account for account in listed_accounts(session) if account.name == name)


def _refuse_losing_the_last_admin(session: Session, account: Account, change: str) -> None:
    """Locks the admins' rows (PostgreSQL; SQLite's write transaction holds the whole database) so that two
    admins demoting each other at once cannot both succeed."""
    if account.role != Role.admin:
        return
    admins = session.exec(select(Account.id).where(Account.role == Role.admin.value).with_for_update()).all()
    if len(admins) <= 1:
        raise LastAdmin(
            f"{account.name!r} is the last admin: {change} would leave nobody to manage accounts. "
            "Make another account admin first."
        )


def set_role(session: Session, name: str, role: Role) -> Account:
    account = get_account(session, name)
    if Role(role) != Role.admin:
        _refuse_losing_the_last_admin(session, account, f"making it {role}")
    account.role = Role(role).value
    session.add(account)
    return account


def remove_account(session: Session, name: str) -> None:
    """The account, its sessions and its tokens (signed-in browsers are signed out at once)."""
    account = get_account(session, name)
    _refuse_losing_the_last_admin(session, account, "removing it")
    session.exec(delete(AccountSession).where(col(AccountSession.account_id) == account.id))
    session.exec(delete(ApiToken).where(col(ApiToken.account_id) == account.id))
    session.delete(account)


@dataclass(frozen=True)
class SignedOut:
    """What a password change ended besides the session it was made in."""

    sessions: int
    tokens: int


def set_password(
    session: Session, account: Account, password_hash: str, sign_out: bool, keep_session: str | None = None
) -> SignedOut:
    """Store a new hash (``hash_password``). With ``sign_out`` the account's sessions end, all but the cookie
    ``keep_session`` (the browser that changed it), and its active API tokens are revoked."""
    account.password_hash = password_hash
    session.add(account)
    if not sign_out:
        return SignedOut(0, 0)
    ended = delete(AccountSession).where(col(AccountSession.account_id) == account.id)
    if keep_session is not None:
        ended = ended.where(col(AccountSession.token_hash) != hash_token(keep_session))
    sessions = session.exec(ended).rowcount
    tokens = [token for token in list_api_tokens(session, account.id) if credential_state(token) == "active"]
    for token in tokens:
        revoke(session, token)
    return SignedOut(sessions, len(tokens))


def reset_password(session: Session, name: str, sign_out: bool) -> tuple[str, SignedOut]:
    """A new random password for the account (shown once) and what it signed out. Hashed before the first
    statement, as ``create_account``."""
    password = new_password()
    password_hash = hash_password(password)
    return password, set_password(session, get_account(session, name), password_hash, sign_out)


def password_hash_of(session: Session, name: str) -> str | None:
    return session.exec(select(Account.password_hash).where(Account.name == name)).first()


def check_password(password_hash: str | None, password: str) -> bool:
    """Whether ``password`` matches; no database here: run it with no transaction open. An unknown account
    (None) is checked against a random hash, so a wrong name takes as long as a wrong password."""
    try:
        return _hasher.verify(password_hash or _UNKNOWN_ACCOUNT_HASH, password) and password_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def counted_address(peer: str) -> str:
    """The address failures are counted under: an IPv4 address as it is (also when it comes IPv4-mapped,
    ::ffff:a.b.c.d, from a server listening on ::), an IPv6 address as its /64, anything else (no IP at
    all) as it is."""
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return peer
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_PREFIX_COUNTED), strict=False))
    return str(address)


def _growing_wait(failures: int, free: int) -> timedelta:
    """1 s after the first failure past the free ones, doubling with each further one, at most MAX_WAIT."""
    past = failures - free
    return timedelta(0) if past <= 0 else min(timedelta(seconds=2 ** min(past - 1, 20)), MAX_WAIT)


def _recent_failures(session: Session, since: datetime, *conditions) -> tuple[int, datetime | None]:
    statement = select(func.count(), func.max(SignInFailure.failed_at)).where(
        col(SignInFailure.failed_at) > since, *conditions
    )
    count, newest = session.exec(statement).one()
    return count, newest


def refuse_if_held_off(session: Session, name: str, address: str) -> int:
    """Raises ``SignInRateLimited`` while this address, or this address at this account, must wait after its
    failures (see FREE_FAILURES_PER_ADDRESS). Asked before the password is checked: a held-off guess costs
    neither Argon2 nor a write. The owner's address, which has not failed, is never held off.

    Returns the address's recent failures (at any name), 0 for an address that has not failed."""
    now = utc_now()
    since = now - FAILURE_WINDOW
    by_name = col(SignInFailure.account_name) == name[:MAX_NAME_LENGTH]
    from_address = col(SignInFailure.address) == address
    at_account, _ = _recent_failures(session, since, by_name)
    from_here = _recent_failures(session, since, from_address)
    at_account_from_here = _recent_failures(session, since, from_address, by_name)
    free_here = 0 if at_account >= ACCOUNT_UNDER_ATTACK else FREE_FAILURES_PER_ACCOUNT_FROM_AN_ADDRESS
    for what, (count, newest), free in (
        ("from your address", from_here, FREE_FAILURES_PER_ADDRESS),
        ("at this account from your address", at_account_from_here, free_here),
    ):
        wait = _growing_wait(count, free)
        if newest is not None and newest + wait > now:
            seconds = math.ceil((newest + wait - now).total_seconds())
            raise SignInRateLimited(
                f"Too many failed sign-ins {what}: {count} in {FAILURE_WINDOW.seconds // 60} minutes. "
                f"Try again in {seconds} s.",
                seconds,
            )
    return from_here[0]


def record_failure(session: Session, name: str, address: str) -> None:
    """Counted in its own short transaction, so that it stays when the sign-in is refused."""
    now = utc_now()
    session.exec(delete(SignInFailure).where(col(SignInFailure.failed_at) < now - FAILURE_WINDOW))
    session.add(SignInFailure(account_name=name[:MAX_NAME_LENGTH], address=address, failed_at=now))


def forget_failures(session: Session, name: str, address: str) -> None:
    """After the right password from ``address``: its own slips there are forgiven; others' guesses at the
    account still count, so a guesser gains nothing from the owner signing in."""
    session.exec(
        delete(SignInFailure).where(
            col(SignInFailure.account_name) == name[:MAX_NAME_LENGTH], col(SignInFailure.address) == address
        )
    )


def start_session(session: Session, account: Account, lifetime: timedelta) -> str:
    """A new session for ``account``; returns the cookie value (kept nowhere else)."""
    secret = new_secret()
    now = utc_now()
    session.exec(delete(AccountSession).where(col(AccountSession.expires_at) < now))
    session.add(AccountSession(account_id=account.id, token_hash=hash_token(secret), expires_at=now + lifetime))
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
