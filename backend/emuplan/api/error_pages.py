"""Every error answered twice over: an HTML page for a browser, ``{"detail": message}`` for everyone else.

The status and message come from the domain error itself (``api/errors.py``), Starlette's
``HTTPException`` (an unknown path, a wrong method), FastAPI's validation of the request (422) or an
unhandled exception (500). A browser, whose Accept header names ``text/html``, gets a page in the site's
look that says what happened and where to go; ``/api/...`` always answers JSON, as do clients that do
not ask for HTML (the CLI, ``fetch`` from our pages, curl's ``*/*``).
"""

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from emuplan.api.errors import ANSWERED_ERRORS, error_response
from emuplan.api.render import render
from emuplan.api.urls import url_path

# What each status means to the reader of the page, in a heading.
HEADINGS = {
    400: "This file or request cannot be read",
    401: "Sign in first",
    403: "Your account may not do this",
    404: "Nothing here",
    405: "This address does not take that request",
    409: "This clashes with what is already there",
    410: "This is gone",
    413: "This is too large",
    415: "This kind of file is not supported",
    422: "Some of what was sent cannot be used",
    429: "Too many attempts",
    500: "Something went wrong on the server",
    503: "The server is busy",
    507: "The server's disk is full",
}

# Where a reader goes from a failed address: the list its first path segment belongs to (a route's name).
PLACES = {
    "runs": ("runs_page", "All runs"),
    "plans": ("plans_page", "Saved plans"),
    "plan": ("plan_page", "Plan a model"),
    "compare": ("compare_page", "Compare runs"),
    "comparisons": ("compare_page", "Compare runs"),
    "trend": ("trend_page", "Trend"),
    "platforms": ("platforms_page", "Platforms"),
    "account": ("account_page", "Your account"),
    "admin": ("admin_page", "Accounts"),
}


def wants_html(request: Request) -> bool:
    """Whether the client asked for a page: not under /api/, and text/html among its Accept types (q > 0)."""
    if request.url.path == "/api" or request.url.path.startswith("/api/"):
        return False
    for item in request.headers.get("accept", "").split(","):
        media_type, *parameters = (part.strip() for part in item.split(";"))
        if media_type.lower() == "text/html":
            return all(_quality(parameter) != 0 for parameter in parameters)
    return False


def _quality(parameter: str) -> float | None:
    name, _, value = parameter.partition("=")
    if name.strip().lower() != "q":
        return None
    try:
        return float(value)
    except ValueError:
        return None


def error_page(request: Request, status_code: int, detail: str, headers: dict[str, str] | None = None) -> Response:
    first_segment = request.url.path.strip("/").split("/")[0]
    listed = [PLACES[first_segment]] if first_segment in PLACES else []
    places = [(url_path(request.app, name), text) for name, text in [*listed, ("home", "Home")]]
    if status_code == 401:
        places.insert(0, (url_path(request.app, "sign_in_page", query={"next": request.url.path}), "Sign in"))
    return render(
        request,
        "error.html",
        status_code=status_code,
        headers=headers,
        status=status_code,
        heading=HEADINGS.get(status_code, "This request failed"),
        detail=detail,
        path=request.url.path,
        places=places,
    )


async def _domain_error(request: Request, error: Exception) -> Response:
    response = error_response(error)
    if wants_html(request):
        # The store's messages start in lower case to read inside a sentence (the CLI's "Error: run 7 does not exist").
        detail = response.detail[:1].upper() + response.detail[1:]
        return error_page(request, response.status_code, detail, response.headers)
    return JSONResponse(
        {"detail": response.detail, **response.extra}, status_code=response.status_code, headers=response.headers
    )


async def _http_error(request: Request, error: StarletteHTTPException) -> Response:
    # Below 400 it is a redirect raised as an exception (the sign-in page's), answered as FastAPI does.
    if error.status_code >= 400 and wants_html(request):
        detail = f"No page or file at {request.url.path}." if error.status_code == 404 else str(error.detail)
        return error_page(request, error.status_code, detail, error.headers)
    return await http_exception_handler(request, error)


async def _validation_error(request: Request, error: RequestValidationError) -> Response:
    if wants_html(request):
        # Each problem where it is: "run_id in the path: Input should be a valid integer, …".
        lines = [
            f"{'.'.join(str(part) for part in problem['loc'][1:])} in the {problem['loc'][0]}: {problem['msg']}"
            for problem in error.errors()
        ]
        return error_page(request, 422, "\n".join(lines))
    return await request_validation_exception_handler(request, error)


async def _server_error(request: Request, error: Exception) -> Response:
    # Starlette's ServerErrorMiddleware logs the traceback and re-raises after this answer; the reader is told
    # only that it is the server's fault, never the exception's text (it may hold paths or SQL).
    detail = "An unexpected error on the server: a bug. The server's log has the details."
    if wants_html(request):
        try:
            return error_page(request, 500, detail)
        except Exception:  # the page itself failed (a template, the static files): the message as JSON then
            pass
    return JSONResponse({"detail": detail}, status_code=500)


def install_error_responses(app: FastAPI) -> None:
    for error_class in ANSWERED_ERRORS:
        app.add_exception_handler(error_class, _domain_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _server_error)
