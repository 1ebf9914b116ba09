"""Who may talk to the server: only configured host names, and no writes started by another site.

A page on another origin can still send a browser's "simple" POST (``mode: "no-cors"``, a form body)
to the server, and a DNS-rebinding page reaches it under a host name of the attacker's choosing. So:

- a request whose ``Host`` is not one of ``EMUPLAN_ALLOWED_HOSTS`` gets 400 (nothing is served under
  a name the operator did not choose, and no redirect ever points elsewhere); the loopback names the
  default adds (localhost, 127.0.0.1, ::1) get 400 too unless the connection comes from this machine:
  on a server listening beyond loopback, saying ``Host: localhost`` from elsewhere proves nothing;
- an unsafe method (POST, PUT, PATCH, DELETE) gets 403 when the browser says it comes from another
  site: ``Sec-Fetch-Site`` other than ``same-origin`` or ``none`` (typed by the user), or, from
  browsers that do not send it, an ``Origin`` that is not this server's. Requests carrying neither
  header (the CLI, curl, scripts) are not browser requests made on someone's behalf and pass.
"""

from urllib.parse import urlsplit

from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from emuplan.settings import is_loopback

UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# "same-site" is refused too: another port on the same host is another origin but the same site.
OWN_FETCH_SITES = frozenset({"same-origin", "none"})


def host_name(host_header: str) -> str | None:
    """'Example.org:8000' → 'example.org', '[::1]:8000' → '::1'; None when it is not a host[:port]."""
    try:
        parts = urlsplit(f"//{host_header}")
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    return parts.hostname


def cross_site_reason(method: str, headers: Headers) -> str | None:
    """Why this request is a write from another site, or None when it is not one."""
    if method not in UNSAFE_METHODS:
        return None
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site.lower() in OWN_FETCH_SITES:
            return None
        return f"the browser marks it Sec-Fetch-Site: {fetch_site}"
    origin = headers.get("origin")
    if origin is None:
        return None
    if origin == "null" or urlsplit(origin).netloc.lower() != headers.get("host", "").lower():
        return f"it comes from the page origin {origin!r}"
    return None


class RequestGuardMiddleware:
    def __init__(self, app: ASGIApp, allowed_hosts: list[str], local_only_hosts: frozenset[str]):
        self.app = app
        self.allow_any_host = "*" in allowed_hosts
        self.allowed_hosts = frozenset(name.lower().strip("[]") for name in allowed_hosts)
        self.local_only_hosts = frozenset(name.lower().strip("[]") for name in local_only_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        name = host_name(host)
        if not self.allow_any_host and (name is None or name not in self.allowed_hosts):
            detail = (
                f"Host {host!r} is not served here. The operator lists the names this server answers to in "
                "EMUPLAN_ALLOWED_HOSTS."
            )
            await JSONResponse(status_code=400, content={"detail": detail})(scope, receive, send)
            return
        # No client address: a Unix socket, on this machine too.
        peer = (scope.get("client") or ("127.0.0.1", 0))[0]
        if name in self.local_only_hosts and not is_loopback(peer):
            detail = (
                f"Host {host!r} is served only to connections from this machine, and this one comes from {peer}. "
                "Open the dashboard under the server's name; the operator lists the names in EMUPLAN_ALLOWED_HOSTS."
            )
            await JSONResponse(status_code=400, content={"detail": detail})(scope, receive, send)
            return
        reason = cross_site_reason(scope["method"], headers)
        if reason is not None:
            detail = f"Refused a {scope['method']} from another site ({reason}): open the dashboard itself to do this."
            await JSONResponse(status_code=403, content={"detail": detail})(scope, receive, send)
            return
        await self.app(scope, receive, send)
