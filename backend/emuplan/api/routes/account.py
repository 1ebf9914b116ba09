"""/api/account: the signed-in account and its API tokens (``EMUPLAN_AUTH=accounts`` only). Accounts themselves
are made and removed by an admin on /admin (``api/pages/admin.py``) or with ``emuplan users``."""

from datetime import datetime

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field

from emuplan.api.access import ANY_ROLE, require_accounts_on, requires_roles, signed_in
from emuplan.api.deps import DatabaseInt, ReadSessionDep, WriteSessionDep
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.store import accounts as store

# The account API needs a signed-in account, of any role: a viewer makes and revokes tokens for their own scripts too.
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


@router.get("", name="who_am_i", response_model=AccountPublic)
def who_am_i(request: Request) -> dict:
    who = signed_in(request)
    return {"name": who.name, "role": who.role.value, "signed_in_with": who.via}


@router.get("/tokens", name="list_tokens", response_model=list[TokenPublic])
def list_tokens(request: Request, session: ReadSessionDep) -> list[dict]:
    return [store.api_token_document(token) for token in store.list_api_tokens(session, signed_in(request).account_id)]


@router.post("/tokens", name="create_token", status_code=201, response_model=TokenCreated)
def create_token(body: TokenCreate, request: Request, session: WriteSessionDep, response: Response) -> dict:
    token, secret = store.create_api_token(session, signed_in(request).account_id, body.label, body.expires_in_days)
    session.commit()
    response.headers["Cache-Control"] = "no-store"
    return {**store.api_token_document(token), "token": secret}


@router.delete("/tokens/{token_id}", name="revoke_token", response_model=TokenPublic)
def revoke_token(token_id: DatabaseInt, request: Request, session: WriteSessionDep) -> dict:
    token = store.revoke_api_token(session, signed_in(request).account_id, token_id)
    session.commit()
    return store.api_token_document(token)
