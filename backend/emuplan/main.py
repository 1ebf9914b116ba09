"""The FastAPI application: ``create_app()`` wires settings, database, middleware and routers."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from emuplan import __version__
from emuplan.api import compare, comparisons, health, measure, models, pages, plans, runs, static_files
from emuplan.api.errors import install_error_responses
from emuplan.api.request_guard import RequestGuardMiddleware
from emuplan.api.uploads import BodySizeLimitMiddleware
from emuplan.demo import load_demo
from emuplan.settings import Settings, get_settings
from emuplan.store.db import Database, migrate

# Plotly.js sets inline styles on the elements it draws, hence 'unsafe-inline' for styles only.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# Swagger UI boots from one inline script; /docs shows no user content.
DOCS_CONTENT_SECURITY_POLICY = CONTENT_SECURITY_POLICY.replace(
    "script-src 'self'", "script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net"
).replace("style-src 'self' 'unsafe-inline'", "style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net")


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        policy = DOCS_CONTENT_SECURITY_POLICY if path in ("/docs", "/redoc") else CONTENT_SECURITY_POLICY

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
    )
    app.state.settings = settings
    app.state.database = Database(settings.database_url)
    app.state.static_files = static_files.static_files(settings.frontend_dir / "static")

    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_upload_bytes)
    app.add_middleware(RequestGuardMiddleware, allowed_hosts=settings.allowed_hosts)
    app.add_middleware(SecurityHeadersMiddleware)
    # Pages and JSON (chart figures among them) travel compressed; static files come gzipped already.
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=5)

    install_error_responses(app)
    for router in (
        static_files.router,
        health.router,
        comparisons.router,
        comparisons.shared_router,
        compare.router,
        models.router,
        plans.router,
        plans.presets_router,
        runs.router,
        measure.plan_router,
        measure.router,
        pages.router,
    ):
        app.include_router(router)
    comparisons.install_share_token_redaction()
    return app
