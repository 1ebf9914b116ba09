"""/sign-in and /sign-out (``EMUPLAN_AUTH=accounts`` only): plain HTML forms (no script), so the browser
posts them to this server and ``api/request_guard.py`` sees ``Sec-Fetch-Site: same-origin``.

A password is checked in three steps, none of which holds the database's write lock while Argon2 runs:
a read (is this address held off? the stored hash), the check itself (``api/password_checks.py``), and a
short write of the outcome.
"""

import logging
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from emuplan.api.access import SESSION_COOKIE, require_accounts_on
from emuplan.api.errors import error_response
from emuplan.api.password_checks import password_checks
from emuplan.api.render import render
from emuplan.api.urls import url_path
from emuplan.store import accounts as store
from emuplan.store.db import DatabaseBusy

logger = logging.getLogger("emuplan.account")

# Sign-in is open to everyone.
router = APIRouter(include_in_schema=False, dependencies=[Depends(require_accounts_on)])


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


@router.get("/sign-in", name="sign_in_page", response_class=HTMLResponse)
def sign_in_page(request: Request, next: str = "/") -> HTMLResponse:
    return render(request, "sign_in.html", next=_local_path(next), name="", error=None)


@router.post("/sign-in", name="sign_in", response_class=HTMLResponse)
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


@router.post("/sign-out", name="sign_out")
def sign_out(request: Request) -> Response:
    secret = request.cookies.get(SESSION_COOKIE)
    if secret:
        with request.app.state.database.writing() as session:
            store.end_session(session, secret)
    response = RedirectResponse(url_path(request.app, "sign_in_page"), status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax")
    return response
