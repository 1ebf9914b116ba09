"""/admin: the accounts page of an admin (``EMUPLAN_AUTH=accounts`` only), plain HTML forms over the same
store functions as /api/admin/accounts (``api/routes/admin.py``) and ``emuplan users``."""

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse

from emuplan.api.access import require_accounts_on, requires_roles
from emuplan.api.deps import ReadSessionDep, WriteSessionDep
from emuplan.api.errors import ErrorResponse, error_response
from emuplan.api.pages.account import signed_out_notice
from emuplan.api.render import render
from emuplan.api.routes.admin import ADMIN_ONLY, NO_STORE, signs_out
from emuplan.roles import ROLE_DUTIES, Role
from emuplan.store import accounts as store

router = APIRouter(
    include_in_schema=False, dependencies=[Depends(require_accounts_on), *requires_roles(**ADMIN_ONLY, page=True)]
)
AccountName = Annotated[str, Form(max_length=store.MAX_NAME_LENGTH)]


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
        signs_out=signs_out(request),
        issued=issued,
        notice=notice,
        error=failure.detail if failure else None,
    )


@router.get("/admin", name="admin_page", response_class=HTMLResponse)
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


@router.post("/admin/accounts", name="add_account_form", response_class=HTMLResponse)
def add_account_form(
    request: Request, session: WriteSessionDep, name: AccountName, role: Annotated[Role, Form()]
) -> HTMLResponse:
    def add(session) -> tuple[tuple[str, str], str]:
        account, password = store.create_account(session, name, role)
        return (account.name, password), f"Account {account.name!r} added as {role}."

    return _apply(request, session, add)


@router.post("/admin/role", name="change_role_form", response_class=HTMLResponse)
def change_role_form(
    request: Request, session: WriteSessionDep, name: AccountName, role: Annotated[Role, Form()]
) -> HTMLResponse:
    def change(session) -> tuple[None, str]:
        store.set_role(session, name, role)
        return None, f"{name!r} is now {role}."

    return _apply(request, session, change)


@router.post("/admin/password", name="reset_password_form", response_class=HTMLResponse)
def reset_password_form(request: Request, session: WriteSessionDep, name: AccountName) -> HTMLResponse:
    def reset(session) -> tuple[tuple[str, str], str]:
        password, signed_out = store.reset_password(session, name, signs_out(request))
        return (name, password), f"New password for {name!r}.{signed_out_notice(signed_out, 'of theirs')}"

    return _apply(request, session, reset)


@router.post("/admin/remove", name="remove_account_form", response_class=HTMLResponse)
def remove_account_form(request: Request, session: WriteSessionDep, name: AccountName) -> HTMLResponse:
    def remove(session) -> tuple[None, str]:
        store.remove_account(session, name)
        return None, f"Account {name!r} removed, with its sessions and API tokens."

    return _apply(request, session, remove)
