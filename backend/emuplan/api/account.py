"""Sign-in, sign-out, the account page and its API tokens (``EMUPLAN_AUTH=accounts`` only).

The sign-in and account pages are plain HTML forms (no script): the browser posts them to this
server, so ``api/request_guard.py`` sees ``Sec-Fetch-Site: same-origin`` and lets them through.
Accounts themselves are made and removed by an admin with ``emuplan users`` on the server.
"""

import logging
from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from pydantic import BaseModel, Field

from emuplan.api.access import SESSION_COOKIE, accounts_on, requires_roles, signed_in
from emuplan.api.deps import DatabaseInt, ReadSessionDep, WriteSessionDep
from emuplan.api.errors import error_response
from emuplan.api.pages import render
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.roles import ROLE_DUTIES, Role
from emuplan.store import accounts as store
from emuplan.store.rows import NotFound

logger = logging.getLogger("emuplan.account")


class SignInOff(NotFound):
    """Accounts are off (``EMUPLAN_AUTH=none``): there is nothing to sign in to."""


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
    return request.client.host if request.client else "unknown"


@sign_in_router.get("/sign-in", response_class=HTMLResponse)
def sign_in_page(request: Request, next: str = "/") -> HTMLResponse:
    return render(request, "sign_in.html", next=_local_path(next), name="", error=None)


@sign_in_router.post("/sign-in", response_class=HTMLResponse)
def sign_in(
    request: Request,
    name: Annotated[str, Form(max_length=store.MAX_NAME_LENGTH)],
    password: Annotated[str, Form(max_length=1024)],
    next: Annotated[str, Form(max_length=2048)] = "/",
) -> Response:
    database = request.app.state.database
    settings = request.app.state.settings
    address = _client_address(request)
    try:
        with database.writing() as session:
            try:
                account = store.check_password(session, name, password, address)
            except store.SignInRefused:
                # Counted even though the sign-in fails: this transaction commits the failure.
                store.record_failure(session, name, address)
                refused = True
            else:
                secret = store.start_session(session, account, timedelta(days=settings.session_days))
                refused = False
        if refused:
            raise store.SignInRefused("Wrong name or password.")
    except (store.SignInRefused, store.SignInRateLimited) as error:
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
    logger.info("account %r signed in from %s", account.name, address)
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
    error: str | None = None,
    notice: str | None = None,
) -> HTMLResponse:
    who = signed_in(request)
    tokens = [store.api_token_document(token) for token in store.list_api_tokens(session, who.account_id)]
    return render(
        request,
        "account.html",
        status_code=200 if error is None else 422,
        headers={"Cache-Control": "no-store"},
        nav="account",
        who=who,
        role_duties=ROLE_DUTIES[who.role],
        tokens=tokens,
        created=created,
        error=error,
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
        return _account_page(request, session, error=str(error))
    session.commit()
    return _account_page(request, session, created=(label.strip(), secret))


@page_router.post("/account/tokens/{token_id}/revoke")
def revoke_token_form(token_id: DatabaseInt, request: Request, session: WriteSessionDep) -> Response:
    store.revoke_api_token(session, signed_in(request).account_id, token_id)
    session.commit()
    return RedirectResponse("/account", status_code=303)


@page_router.post("/account/password", response_class=HTMLResponse)
def change_password_form(
    request: Request,
    session: WriteSessionDep,
    current_password: Annotated[str, Form(max_length=1024)],
    new_password: Annotated[str, Form(max_length=1024)],
) -> HTMLResponse:
    try:
        store.change_password(session, signed_in(request).account_id, current_password, new_password)
    except ValueError as error:
        session.rollback()
        return _account_page(request, session, error=str(error))
    session.commit()
    return _account_page(request, session, notice="Password changed: use the new one from now on.")


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
