"""The one URL builder: every path the app writes is built from a route's name (each route declares one, e.g.
``@router.get("/runs/{run_id}", name="run_page")``), so no path is spelled twice.

Python calls ``url_path(app, "run_page", run_id=3)``; templates ``url("run_page", run_id=3)`` (``render``
passes it); JavaScript ``url("run_page", { run_id: 3 })`` from ``static/util.js``, over the table of route
names the base template carries (``route_table``).
"""

from collections.abc import Mapping
from urllib.parse import quote, urlencode

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route


def url_path(app: Starlette, route: str, /, query: Mapping[str, object] | None = None, **path_params: object) -> str:
    """The path of the route named ``route`` with ``path_params`` filled in (each quoted: a platform's name may hold any
    character), and ``query`` after it where given (empty values left out; ``,`` and ``:`` kept readable)."""
    path = app.url_path_for(route, **{key: quote(str(value), safe="") for key, value in path_params.items()})
    kept = {key: value for key, value in (query or {}).items() if value is not None and value != ""}
    return f"{path}?{urlencode(kept, safe=',:')}" if kept else path


def route_table(app: Starlette) -> dict[str, str]:
    """Every named route's path template (``/runs/{run_id}``), for the JavaScript's ``url``: built at the first
    page, once every router is included, and kept on the app."""
    if not hasattr(app.state, "route_table"):
        app.state.route_table = {route.name: route.path for route in app_routes(app.routes)}
    return app.state.route_table


def app_routes(routes: list[BaseRoute]) -> list[Route]:
    """Every route of the app, those of included routers among them."""
    # FastAPI (0.120 on) keeps an included router as one entry whose candidates are its routes.
    flat = []
    for route in routes:
        if hasattr(route, "effective_candidates"):
            flat.extend(getattr(candidate, "route", candidate) for candidate in route.effective_candidates())
        elif isinstance(route, Route):
            flat.append(route)
    return flat
