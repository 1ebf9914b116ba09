"""The one dependency that decides whether a request may go on: every protected router carries it.

With ``EMUPLAN_AUTH=none`` (the default) everyone may do everything. With ``accounts`` the request
must come from a live session cookie or an active ``Authorization: Bearer`` token, and its account's
role must reach what the method needs: reads (GET, HEAD) the viewer role, writes the editor role, and
deletes whatever the router says (deleting a run: admin); a router may ask more for reads too (the
accounts of /admin: admin) or less for writes (a plan preview computes and stores nothing: viewer). A
signed-out API request gets 401, a signed-out page request is sent to the sign-in page, a role too low
gets 403 naming the role needed.

Cross-site writes riding on the cookie are refused before this, by ``api/request_guard.py``, and the
cookie is ``SameSite=Lax`` besides.
"""

from fastapi import Depends, HTTPException, Request

from emuplan.api.urls import url_path
from emuplan.errors import EmuplanError
from emuplan.roles import ROLE_DUTIES, Role
from emuplan.store import accounts as store
from emuplan.store.rows import NotFound

SESSION_COOKIE = "emuplan_session"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class NotSignedIn(EmuplanError):
    """HTTP 401: no credentials, or credentials that open nothing (unknown, expired, revoked)."""

    http_status = 401
    http_headers = {"WWW-Authenticate": "Bearer"}


class RoleMissing(EmuplanError):
    """HTTP 403: signed in, but the account's role does not reach the role this request needs."""

    http_status = 403


def bearer_token(request: Request) -> str | None:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" and credentials.strip() else None


def signed_in(request: Request) -> store.SignedIn | None:
    """Who sent this request (a Bearer token wins over the cookie), or None; looked up once per request."""
    if hasattr(request.state, "signed_in"):
        return request.state.signed_in
    who = None
    token = bearer_token(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    if token is not None or cookie:
        with request.app.state.database.read_session() as session:
            who = (
                store.resolve_api_token(session, token) if token is not None else store.resolve_session(session, cookie)
            )
    request.state.signed_in = who
    return who


def accounts_on(request: Request) -> bool:
    return request.app.state.settings.auth == "accounts"


def _not_signed_in_message(request: Request) -> str:
    if bearer_token(request) is not None:
        return "The API token is unknown, expired or revoked: make a new one on /account or with `emuplan users token`."
    return (
        "Sign in first: this server lets only its accounts in. Open /sign-in in a browser; scripts and the CLI "
        "send an API token as 'Authorization: Bearer TOKEN'."
    )


class RoleRequired:
    """Router dependency: the role each method needs (``delete`` may be set higher, e.g. admin for runs;
    ``write`` lower, e.g. for one's own API tokens; ``read`` higher, e.g. admin for the list of accounts).

    ``page``: a signed-out browser is redirected to the sign-in page (and back) instead of getting 401.
    """

    def __init__(
        self, *, read: Role = Role.viewer, write: Role = Role.editor, delete: Role = Role.editor, page: bool = False
    ):
        self.read = read
        self.write = write
        self.delete = delete
        self.page = page

    def needed(self, method: str) -> Role:
        if method in READ_METHODS:
            return self.read
        return self.delete if method == "DELETE" else self.write

    def __call__(self, request: Request) -> None:
        if not accounts_on(request):
            return
        who = signed_in(request)
        if who is None:
            if self.page:
                target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                sign_in = url_path(request.app, "sign_in_page", query={"next": target})
                raise HTTPException(status_code=303, headers={"Location": sign_in})
            raise NotSignedIn(_not_signed_in_message(request))
        needed = self.needed(request.method)
        if not who.role.permits(needed):
            raise RoleMissing(
                f"This needs the {needed} role ({ROLE_DUTIES[needed]}); the account {who.name!r} has the "
                f"{who.role} role. An admin can change it with `emuplan users role NAME ROLE`."
            )


def requires_roles(
    *, read: Role = Role.viewer, write: Role = Role.editor, delete: Role = Role.editor, page: bool = False
) -> list:
    """``dependencies=`` for an ``APIRouter``: every route of the router is checked by ``RoleRequired``."""
    return [Depends(RoleRequired(read=read, write=write, delete=delete, page=page))]


class SignInOff(NotFound):
    """Accounts are off (``EMUPLAN_AUTH=none``): there is nothing to sign in to."""


def require_accounts_on(request: Request) -> None:
    if not accounts_on(request):
        raise SignInOff("Sign-in is off on this server (EMUPLAN_AUTH=none): everyone who reaches it may do everything.")


# What every signed-in account may do on its own account (pages and API): a viewer makes and revokes
# tokens for their own scripts too.
ANY_ROLE = {"write": Role.viewer, "delete": Role.viewer}
