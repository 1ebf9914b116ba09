"""Sign-in, sign-out, the account page and its API tokens (``EMUPLAN_AUTH=accounts`` only).

The sign-in and account pages are plain HTML forms (no script): the browser posts them to this
server, so ``api/request_guard.py`` sees ``Sec-Fetch-Site: same-origin`` and lets them through.
Accounts themselves are made and removed by an admin on /admin (``api/admin.py``) or with ``emuplan users``.

A password is checked in three steps, none of which holds the database's write lock while Argon2 runs:
a read (is this address held off? the stored hash), the check itself (``api/password_checks.py``), and a
short write of the outcome.
"""

import logging
from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from emuplan.api.access import SESSION_COOKIE, accounts_on, requires_roles, signed_in
from emuplan.api.deps import DatabaseInt, ReadSessionDep, WriteSessionDep
from emuplan.api.errors import ErrorResponse, error_response
from emuplan.api.pages import render
from emuplan.api.password_checks import password_checks
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.roles import ROLE_DUTIES, Role
from emuplan.store import accounts as store
from emuplan.store.db import DatabaseBusy
from emuplan.store.rows import NotFound
from emuplan.wording import plural

logger = logging.getLogger("emuplan.account")


class SignInOff(NotFound):
    """Accounts are off (``EMUPLAN_AUTH=none``): there is nothing to sign in to."""


class WrongCurrentPassword(ValueError):
    """The password change's current password is wrong: counted as a failed sign-in (HTTP 422)."""


def require_accounts_on(request: Request) -> None:
    if not accounts_on(request):
        raise SignInOff("Sign-in is off on this server (EMUPLAN_AUTH=none): everyone who reaches it may do everything.")


# Sign-in is open to everyone; the account pages and API need a signed-in account, of any role: a viewer
# makes and revokes tokens for their own scripts too.
sign_in_router = APIRouter(include_in_schema=False, dependencies=[Depends(require_accounts_on)])
ANY_ROLE = {"write": Role.viewer, "delete": Role.viewer}
page_router = APIRouter(
    include_in_schema=False, dependencies=[Depends(require_accounts_on), *requires_roles(**ANY_ROLE, page=True)]
)
router = APIRouter(
    prefix="/api/account",
    tags=["account"],
    dependencies=[Depends(require_accounts_on), *requires_roles(**ANY_ROLE)],
    responses=errors(400, *SIGNED_IN, 404, 422),
)


class AccountPublic(BaseModel):
    name: str
    role: str
    signed_in_with: str = Field(description="session (the browser's cookie) or token (Authorization: Bearer).")


class TokenCreate(BaseModel):
    label: str = Field(max_length=store.MAX_LABEL_LENGTH, description="What the token is for, e.g. 'laptop CLI'.")
    expires_in_days: float | None = Field(default=None, description="Omit for a token that never expires.")


class TokenPublic(BaseModel):
    id: int
    label: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    state: str


class TokenCreated(TokenPublic):
    token: str = Field(description="Shown once; only its SHA-256 is stored. Send it as 'Authorization: Bearer'.")


def _local_path(target: str | None) -> str:
    """Where to go after signing in: a path on this server only, never //elsewhere or a full URL. Browsers
    drop tabs and newlines from a URL, so a slash, a tab and /elsewhere would become //elsewhere too."""
    if not target or not target.startswith("/") or "\\" in target or any(c.isspace() for c in target):
        return "/"
    return "/" if target.startswith("//") else target


def _client_address(request: Request) -> str:
    """The peer's address as failures count it (an IPv6 one as its /64); a configured proxy's X-Forwarded-For
    has replaced the peer already (main.py)."""
    return store.counted_address(request.client.host if request.client else "unknown")


async def matched_hash(request: Request, name: str, password: str) -> str | None:
    """The stored hash ``password`` matches for the account ``name``, or None (recorded as a failure from the
    request's address). Raises ``SignInRateLimited`` (before any Argon2) while the address must wait. The
    caller's write checks the hash is still the account's: a password changed meanwhile opens nothing."""
    database = request.app.state.database
    address = _client_address(request)

    def stored_hash() -> tuple[bool, str | None]:
        with database.read_session() as session:
            failed_before = store.refuse_if_held_off(session, name, address) > 0
            return failed_before, store.password_hash_of(session, name)

    def record_failure() -> None:
        with database.writing() as session:
            store.record_failure(session, name, address)

    checks = password_checks(request)
    with checks.one_at_a_time(address):
        failed_before, password_hash = await run_in_threadpool(stored_hash)
        matches = await checks.run(failed_before, store.check_password, password_hash, password)
        if not matches:
            await run_in_threadpool(record_failure)
    return password_hash if matches else None


@sign_in_router.get("/sign-in", response_class=HTMLResponse)
def sign_in_page(request: Request, next: str = "/") -> HTMLResponse:
    return render(request, "sign_in.html", next=_local_path(next), name="", error=None)


@sign_in_router.post("/sign-in", response_class=HTMLResponse)
async def sign_in(
    request: Request,
    name: Annotated[str, Form(max_length=store.MAX_NAME_LENGTH)],
    password: Annotated[str, Form(max_length=1024)],
    next: Annotated[str, Form(max_length=2048)] = "/",
) -> Response:
    settings = request.app.state.settings
    address = _client_address(request)

    def start_session(checked_hash: str) -> str:
        with request.app.state.database.writing() as session:
            account = store.find_account(session, name)
            if account is None or account.password_hash != checked_hash:  # removed or changed meanwhile
                raise store.SignInRefused("Wrong name or password.")
            store.forget_failures(session, name, address)
            return store.start_session(session, account, timedelta(days=settings.session_days))

    try:
        checked_hash = await matched_hash(request, name, password)
        if checked_hash is None:
            raise store.SignInRefused("Wrong name or password.")
        secret = await run_in_threadpool(start_session, checked_hash)
    # A busy database (another write held its lock past the busy timeout) is told on the form, as a 503.
    except (store.SignInRefused, store.SignInRateLimited, DatabaseBusy) as error:
        logger.warning("sign-in refused for account %r from %s: %s", name, address, type(error).__name__)
        failure = error_response(error)
        return render(
            request,
            "sign_in.html",
            status_code=failure.status_code,
            headers=failure.headers,
            next=_local_path(next),
            name=name,
            error=failure.detail,
        )
    logger.info("account %r signed in from %s", name, address)
    response = RedirectResponse(_local_path(next), status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        secret,
        max_age=int(settings.session_days * 86400),
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@sign_in_router.post("/sign-out")
def sign_out(request: Request) -> Response:
    secret = request.cookies.get(SESSION_COOKIE)
    if secret:
        with request.app.state.database.writing() as session:
            store.end_session(session, secret)
    response = RedirectResponse("/sign-in", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax")
    return response


def _account_page(
    request: Request,
    session,
    created: tuple[str, str] | None = None,
    failure: ErrorResponse | None = None,
    notice: str | None = None,
) -> HTMLResponse:
    who = signed_in(request)
    tokens = [store.api_token_document(token) for token in store.list_api_tokens(session, who.account_id)]
    return render(
        request,
        "account.html",
        status_code=200 if failure is None else failure.status_code,
        headers={"Cache-Control": "no-store", **(failure.headers if failure else {})},
        nav="account",
        who=who,
        role_duties=ROLE_DUTIES[who.role],
        tokens=tokens,
        created=created,
        error=failure.detail if failure else None,
        notice=notice,
    )


@page_router.get("/account", response_class=HTMLResponse)
def account_page(request: Request, session: ReadSessionDep) -> HTMLResponse:
    return _account_page(request, session)


@page_router.post("/account/tokens", response_class=HTMLResponse)
def create_token_form(
    request: Request,
    session: WriteSessionDep,
    label: Annotated[str, Form(max_length=store.MAX_LABEL_LENGTH)],
    expires_in_days: Annotated[str, Form()] = "",
) -> HTMLResponse:
    """The new token is on this one response only (not stored, not cached): copy it now."""
    try:
        days = float(expires_in_days) if expires_in_days else None
        _, secret = store.create_api_token(session, signed_in(request).account_id, label, days)
    except ValueError as error:
        session.rollback()
        return _account_page(request, session, failure=error_response(error))
    session.commit()
    return _account_page(request, session, created=(label.strip(), secret))


@page_router.post("/account/tokens/{token_id}/revoke")
def revoke_token_form(token_id: DatabaseInt, request: Request, session: WriteSessionDep) -> Response:
    store.revoke_api_token(session, signed_in(request).account_id, token_id)
    session.commit()
    return RedirectResponse("/account", status_code=303)


def signed_out_notice(signed_out: store.SignedOut, elsewhere: str) -> str:
    if signed_out == store.SignedOut(0, 0):
        return ""
    return (
        f" {plural(signed_out.sessions, 'session')} {elsewhere} ended and "
        f"{plural(signed_out.tokens, 'API token')} revoked."
    )


@page_router.post("/account/password", response_class=HTMLResponse)
async def change_password_form(
    request: Request,
    current_password: Annotated[str, Form(max_length=1024)],
    new_password: Annotated[str, Form(max_length=1024)],
) -> HTMLResponse:
    """The current password is checked like a sign-in (held off after failures, which count as failed
    sign-ins): a stolen session cannot guess its way to the password."""
    who = signed_in(request)
    database = request.app.state.database
    sign_out = request.app.state.settings.password_change_signs_out
    keep = request.cookies.get(SESSION_COOKIE) if who.via == "session" else None

    def store_hash(password_hash: str) -> store.SignedOut:
        with database.writing() as session:
            account = store.get_account(session, who.name)
            return store.set_password(session, account, password_hash, sign_out, keep_session=keep)

    def page(**outcome) -> HTMLResponse:
        with database.read_session() as session:
            return _account_page(request, session, **outcome)

    try:
        if await matched_hash(request, who.name, current_password) is None:
            raise WrongCurrentPassword("current password: that is not your password")
        password_hash = await password_checks(request).run(False, store.hash_password, new_password)
        signed_out = await run_in_threadpool(store_hash, password_hash)
    except (ValueError, store.SignInRateLimited) as error:
        return await run_in_threadpool(page, failure=error_response(error))
    notice = "Password changed: use the new one from now on." + signed_out_notice(signed_out, "elsewhere")
    return await run_in_threadpool(page, notice=notice)


@router.get("", response_model=AccountPublic)
def who_am_i(request: Request) -> dict:
    who = signed_in(request)
    return {"name": who.name, "role": who.role.value, "signed_in_with": who.via}


@router.get("/tokens", response_model=list[TokenPublic])
def list_tokens(request: Request, session: ReadSessionDep) -> list[dict]:
    return [store.api_token_document(token) for token in store.list_api_tokens(session, signed_in(request).account_id)]


@router.post("/tokens", status_code=201, response_model=TokenCreated)
def create_token(body: TokenCreate, request: Request, session: WriteSessionDep, response: Response) -> dict:
    token, secret = store.create_api_token(session, signed_in(request).account_id, body.label, body.expires_in_days)
    session.commit()
    response.headers["Cache-Control"] = "no-store"
    return {**store.api_token_document(token), "token": secret}


@router.delete("/tokens/{token_id}", response_model=TokenPublic)
def revoke_token(token_id: DatabaseInt, request: Request, session: WriteSessionDep) -> dict:
    token = store.revoke_api_token(session, signed_in(request).account_id, token_id)
    session.commit()
    return store.api_token_document(token)
