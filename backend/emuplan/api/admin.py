"""Accounts managed by an admin: the /admin page and /api/admin/accounts (``EMUPLAN_AUTH=accounts`` only).

The same store functions as ``emuplan users``: a new account's password, and a reset one, are random and
shown once (the response is not cached); a reset ends the account's sessions and revokes its API tokens
(``EMUPLAN_PASSWORD_CHANGE_SIGNS_OUT``); the last admin can be neither demoted nor removed (409). Reads
need the admin role too: the list says who may sign in.
"""

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request, Response
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from emuplan.api.access import requires_roles
from emuplan.api.account import require_accounts_on, signed_out_notice
from emuplan.api.deps import ReadSessionDep, WriteSessionDep
from emuplan.api.errors import ErrorResponse, error_response
from emuplan.api.pages import render
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.roles import ROLE_DUTIES, Role
from emuplan.store import accounts as store

ADMIN_ONLY = {"read": Role.admin, "write": Role.admin, "delete": Role.admin}
router = APIRouter(
    prefix="/api/admin/accounts",
    tags=["accounts"],
    dependencies=[Depends(require_accounts_on), *requires_roles(**ADMIN_ONLY)],
    responses=errors(400, *SIGNED_IN, 404, 409, 422),
)
page_router = APIRouter(
    include_in_schema=False, dependencies=[Depends(require_accounts_on), *requires_roles(**ADMIN_ONLY, page=True)]
)
NO_STORE = {"Cache-Control": "no-store"}
AccountName = Annotated[str, Form(max_length=store.MAX_NAME_LENGTH)]


class AccountListed(BaseModel):
    name: str
    role: Role
    created_at: datetime
    sessions: int = Field(description="Browsers signed in now.")
    active_tokens: int = Field(description="API tokens neither revoked nor expired.")


class AccountCreate(BaseModel):
    name: str = Field(
        max_length=store.MAX_NAME_LENGTH,
        description="Sign-in name: letters, digits or . _ @ + - (not starting with . or -).",
    )
    role: Role = Role.viewer


class AccountCreated(AccountListed):
    password: str = Field(description="Shown once: hand it over; its owner changes it on /account.")


class RoleChange(BaseModel):
    role: Role


class PasswordReset(BaseModel):
    name: str
    password: str = Field(description="Shown once.")
    sessions_ended: int
    tokens_revoked: int


def _sign_out(request: Request) -> bool:
    return request.app.state.settings.password_change_signs_out


@router.get("", response_model=list[AccountListed])
def list_accounts(session: ReadSessionDep) -> list[dict]:
    return [account._asdict() for account in store.listed_accounts(session)]


@router.post("", status_code=201, response_model=AccountCreated)
def add_account(body: AccountCreate, session: WriteSessionDep, response: Response) -> dict:
    _, password = store.create_account(session, body.name, body.role)
    session.commit()
    response.headers.update(NO_STORE)
    return {**store.listed_account(session, body.name.strip())._asdict(), "password": password}


@router.patch("/{name}", response_model=AccountListed)
def change_role(name: str, body: RoleChange, session: WriteSessionDep) -> dict:
    store.set_role(session, name, body.role)
    session.commit()
    return store.listed_account(session, name)._asdict()


@router.post("/{name}/password", response_model=PasswordReset)
def reset_password(name: str, request: Request, session: WriteSessionDep, response: Response) -> dict:
    password, signed_out = store.reset_password(session, name, _sign_out(request))
    session.commit()
    response.headers.update(NO_STORE)
    return {
        "name": name,
        "password": password,
        "sessions_ended": signed_out.sessions,
        "tokens_revoked": signed_out.tokens,
    }


@router.delete("/{name}", status_code=204)
def remove_account(name: str, session: WriteSessionDep) -> Response:
    store.remove_account(session, name)
    session.commit()
    return Response(status_code=204)


def _admin_page(
    request: Request,
    session,
    issued: tuple[str, str] | None = None,
    notice: str | None = None,
    failure: ErrorResponse | None = None,
) -> HTMLResponse:
    return render(
        request,
        "admin.html",
        status_code=failure.status_code if failure else 200,
        headers=NO_STORE,
        nav="admin",
        accounts=store.listed_accounts(session),
        roles=list(Role),
        role_duties=ROLE_DUTIES,
        signs_out=_sign_out(request),
        issued=issued,
        notice=notice,
        error=failure.detail if failure else None,
    )


@page_router.get("/admin", response_class=HTMLResponse)
def admin_page(request: Request, session: ReadSessionDep) -> HTMLResponse:
    return _admin_page(request, session)


def _apply(request: Request, session, change) -> HTMLResponse:
    """The page after ``change(session)``, which returns (the (name, password) issued or None, a notice); or
    the page with the refusal and its status (409 for the last admin) and nothing changed."""
    try:
        issued, notice = change(session)
    except (ValueError, store.AccountNotFound) as error:
        session.rollback()
        return _admin_page(request, session, failure=error_response(error))
    session.commit()
    return _admin_page(request, session, issued=issued, notice=notice)


@page_router.post("/admin/accounts", response_class=HTMLResponse)
def add_account_form(
    request: Request, session: WriteSessionDep, name: AccountName, role: Annotated[Role, Form()]
) -> HTMLResponse:
    def add(session) -> tuple[tuple[str, str], str]:
        account, password = store.create_account(session, name, role)
        return (account.name, password), f"Account {account.name!r} added as {role}."

    return _apply(request, session, add)


@page_router.post("/admin/role", response_class=HTMLResponse)
def change_role_form(
    request: Request, session: WriteSessionDep, name: AccountName, role: Annotated[Role, Form()]
) -> HTMLResponse:
    def change(session) -> tuple[None, str]:
        store.set_role(session, name, role)
        return None, f"{name!r} is now {role}."

    return _apply(request, session, change)


@page_router.post("/admin/password", response_class=HTMLResponse)
def reset_password_form(request: Request, session: WriteSessionDep, name: AccountName) -> HTMLResponse:
    def reset(session) -> tuple[tuple[str, str], str]:
        password, signed_out = store.reset_password(session, name, _sign_out(request))
        return (name, password), f"New password for {name!r}.{signed_out_notice(signed_out, 'of theirs')}"

    return _apply(request, session, reset)


@page_router.post("/admin/remove", response_class=HTMLResponse)
def remove_account_form(request: Request, session: WriteSessionDep, name: AccountName) -> HTMLResponse:
    def remove(session) -> tuple[None, str]:
        store.remove_account(session, name)
        return None, f"Account {name!r} removed, with its sessions and API tokens."

    return _apply(request, session, remove)
