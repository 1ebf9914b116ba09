"""/docs: Swagger UI over /openapi.json."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from emuplan.api.access import requires_roles
from emuplan.api.render import render

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


@router.get("/docs", name="api_docs_page", response_class=HTMLResponse)
def api_docs_page(request: Request) -> HTMLResponse:
    """Swagger UI over /openapi.json, its files served locally (no CDN) and started by a file, not an
    inline script, so the page runs under the same CSP as every other."""
    return render(request, "docs.html")
