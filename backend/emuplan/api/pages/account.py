"""/account: the signed-in account, its API tokens and its password (``EMUPLAN_AUTH=accounts`` only)."""

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from starlette.concurrency import run_in_threadpool

from emuplan.api.access import ANY_ROLE, SESSION_COOKIE, require_accounts_on, requires_roles, signed_in
from emuplan.api.deps import DatabaseInt, ReadSessionDep, WriteSessionDep
from emuplan.api.errors import ErrorResponse, error_response
from emuplan.api.pages.sign_in import matched_hash
from emuplan.api.password_checks import password_checks
from emuplan.api.render import render
from emuplan.api.urls import url_path
from emuplan.roles import ROLE_DUTIES
from emuplan.store import accounts as store
from emuplan.wording import plural


class WrongCurrentPassword(ValueError):
    """The password change's current password is wrong: counted as a failed sign-in (HTTP 422)."""


router = APIRouter(
    include_in_schema=False, dependencies=[Depends(require_accounts_on), *requires_roles(**ANY_ROLE, page=True)]
)


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


@router.get("/account", name="account_page", response_class=HTMLResponse)
def account_page(request: Request, session: ReadSessionDep) -> HTMLResponse:
    return _account_page(request, session)


@router.post("/account/tokens", name="create_token_form", response_class=HTMLResponse)
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


@router.post("/account/tokens/{token_id}/revoke", name="revoke_token_form")
def revoke_token_form(token_id: DatabaseInt, request: Request, session: WriteSessionDep) -> Response:
    store.revoke_api_token(session, signed_in(request).account_id, token_id)
    session.commit()
    return RedirectResponse(url_path(request.app, "account_page"), status_code=303)


def signed_out_notice(signed_out: store.SignedOut, elsewhere: str) -> str:
    if signed_out == store.SignedOut(0, 0):
        return ""
    return (
        f" {plural(signed_out.sessions, 'session')} {elsewhere} ended and "
        f"{plural(signed_out.tokens, 'API token')} revoked."
    )


@router.post("/account/password", name="change_password_form", response_class=HTMLResponse)
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
