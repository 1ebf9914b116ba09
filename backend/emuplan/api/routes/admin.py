"""/api/admin/accounts: accounts managed by an admin, as JSON (``EMUPLAN_AUTH=accounts`` only; the /admin
page: ``api/pages/admin.py``).

The same store functions as ``emuplan users``: a new account's password, and a reset one, are random and
shown once (the response is not cached); a reset ends the account's sessions and revokes its API tokens
(``EMUPLAN_PASSWORD_CHANGE_SIGNS_OUT``); the last admin can be neither demoted nor removed (409). Reads
need the admin role too: the list says who may sign in.
"""

from datetime import datetime

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field

from emuplan.api.access import requires_roles
from emuplan.api.deps import ReadSessionDep, WriteSessionDep
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.api.routes.account import require_accounts_on
from emuplan.roles import Role
from emuplan.store import accounts as store

ADMIN_ONLY = {"read": Role.admin, "write": Role.admin, "delete": Role.admin}
router = APIRouter(
    prefix="/api/admin/accounts",
    tags=["accounts"],
    dependencies=[Depends(require_accounts_on), *requires_roles(**ADMIN_ONLY)],
    responses=errors(400, *SIGNED_IN, 404, 409, 422),
)
NO_STORE = {"Cache-Control": "no-store"}


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


def signs_out(request: Request) -> bool:
    return request.app.state.settings.password_change_signs_out


@router.get("", name="list_accounts", response_model=list[AccountListed])
def list_accounts(session: ReadSessionDep) -> list[dict]:
    return [account._asdict() for account in store.listed_accounts(session)]


@router.post("", name="add_account", status_code=201, response_model=AccountCreated)
def add_account(body: AccountCreate, session: WriteSessionDep, response: Response) -> dict:
    _, password = store.create_account(session, body.name, body.role)
    session.commit()
    response.headers.update(NO_STORE)
    return {**store.listed_account(session, body.name.strip())._asdict(), "password": password}


@router.patch("/{name}", name="change_role", response_model=AccountListed)
def change_role(name: str, body: RoleChange, session: WriteSessionDep) -> dict:
    store.set_role(session, name, body.role)
    session.commit()
    return store.listed_account(session, name)._asdict()


@router.post("/{name}/password", name="reset_password", response_model=PasswordReset)
def reset_password(name: str, request: Request, session: WriteSessionDep, response: Response) -> dict:
    password, signed_out = store.reset_password(session, name, signs_out(request))
    session.commit()
    response.headers.update(NO_STORE)
    return {
        "name": name,
        "password": password,
        "sessions_ended": signed_out.sessions,
        "tokens_revoked": signed_out.tokens,
    }


@router.delete("/{name}", name="remove_account", status_code=204)
def remove_account(name: str, session: WriteSessionDep) -> Response:
    store.remove_account(session, name)
    session.commit()
    return Response(status_code=204)
