"""The FastAPI application: ``create_app()`` wires settings, database, middleware and routers."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from emuplan import __version__
from emuplan.api import static_files
from emuplan.api.error_pages import install_error_responses
from emuplan.api.memory import return_large_blocks_when_freed
from emuplan.api.pages import account as account_page
from emuplan.api.pages import admin as admin_page
from emuplan.api.pages import compare as compare_page
from emuplan.api.pages import comparisons as comparison_page
from emuplan.api.pages import docs, home, plan, shared, sign_in
from emuplan.api.pages import plans as plans_page
from emuplan.api.pages import platforms as platforms_page
from emuplan.api.pages import runs as runs_page
from emuplan.api.pages import trend as trend_page
from emuplan.api.request_guard import RequestGuardMiddleware
from emuplan.api.responses import errors
from emuplan.api.routes import (
    account,
    admin,
    compare,
    comparisons,
    health,
    jobs,
    measurements,
    metrics,
    models,
    openapi,
    plans,
    platforms,
    relabel_jobs,
    runs,
    simulations,
    trend,
)
from emuplan.api.uploads import BodySizeLimitMiddleware
from emuplan.demo import load_demo
from emuplan.settings import Settings, get_settings
from emuplan.store.db import Database, migrate

# Plotly.js sets inline styles on the elements it draws, hence 'unsafe-inline' for styles only.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = CONTENT_SECURITY_POLICY

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = message.setdefault("headers", [])
                headers.append((b"content-security-policy", policy.encode()))
                headers.append((b"x-content-type-options", b"nosniff"))
                headers.append((b"x-frame-options", b"DENY"))
                if not any(name.lower() == b"referrer-policy" for name, _ in headers):
                    headers.append((b"referrer-policy", b"same-origin"))
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        return_large_blocks_when_freed()
        migrate(settings.database_url, settings.migrations_dir)
        if settings.demo:
            load_demo(app.state.database)
        yield
        app.state.database.dispose()

    app = FastAPI(
        title="emuplan",
        version=__version__,
        summary="Plan KCCB collective emulations from model definitions and analyse their results.",
        lifespan=lifespan,
        # FastAPI's own pages load Swagger UI and ReDoc from a CDN with an inline script: /docs is ours.
        docs_url=None,
        redoc_url=None,
        openapi_url=None,  # served by api/routes/openapi.py, behind the same role check as the API
        # Any request's body past its limit (api/uploads.py's BodySizeLimitMiddleware), whatever the route.
        responses=errors(413),
    )
    app.state.settings = settings
    app.state.database = Database(settings.database_url)
    app.state.static_files = static_files.static_files(settings.frontend_dir / "static")

    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_upload_bytes)
    app.add_middleware(
        RequestGuardMiddleware, allowed_hosts=settings.allowed_hosts, local_only_hosts=settings.local_only_hosts
    )
    app.add_middleware(SecurityHeadersMiddleware)
    # Pages and JSON (chart figures among them) travel compressed; static files come gzipped already.
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=5)
    if settings.trusted_proxies:
        # Outermost, so that everything inside sees the client's address and scheme. `emuplan serve` turns
        # uvicorn's own proxy headers off (which believe any loopback client): only configured proxies count.
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.trusted_proxies)

    install_error_responses(app)
    # The JSON routers (api/routes/ and the job modules), then the HTML pages (api/pages/).
    for router in (
        static_files.router,
        health.router,
        comparisons.router,
        comparisons.share_links_router,
        comparisons.shared_router,
        compare.router,
        models.router,
        plans.preview_router,
        plans.router,
        plans.presets_router,
        runs.router,
        measurements.plan_router,
        measurements.router,
        relabel_jobs.router,
        simulations.plan_router,
        simulations.router,
        jobs.router,
        platforms.router,
        trend.router,
        metrics.router,
        openapi.router,
        account.router,
        admin.router,
        home.router,
        plan.router,
        plans_page.router,
        runs_page.router,
        compare_page.router,
        comparison_page.router,
        shared.router,
        docs.router,
        platforms_page.router,
        trend_page.router,
        sign_in.router,
        account_page.router,
        admin_page.router,
    ):
        app.include_router(router)
    comparisons.install_share_token_redaction()
    app.openapi = lambda: _openapi_with_message_422(app)
    return app


def _openapi_with_message_422(app: FastAPI) -> dict:
    """The schema as served: a 422's ``detail`` is FastAPI's list of field errors or, from our own checks
    of a field (model name, column map, run ids), one message naming it; document both."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, summary=app.summary, routes=app.routes)
        error = schema.get("components", {}).get("schemas", {}).get("HTTPValidationError")
        if error is not None:
            listed = error["properties"]["detail"]
            error["properties"]["detail"] = {"anyOf": [listed, {"type": "string"}], "title": "Detail"}
        app.openapi_schema = schema
    return app.openapi_schema
