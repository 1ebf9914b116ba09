"""/s/{token}: the read-only page a share link opens."""

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from emuplan.api.deps import ReadSessionDep
from emuplan.api.errors import error_response
from emuplan.api.pages.comparisons import saved_comparison_context
from emuplan.api.render import render
from emuplan.api.urls import url_path
from emuplan.store import comparisons as comparison_store

# What a share link opens is reachable with the token alone, signed in or not.
router = APIRouter(include_in_schema=False)


@router.get("/s/{token}", name="shared_comparison_page", response_class=HTMLResponse)
def shared_comparison_page(token: str, request: Request, session: ReadSessionDep) -> HTMLResponse:
    """The read-only page a share link opens: this comparison, nothing else (no navigation, no edits)."""
    headers = {"Referrer-Policy": comparison_store.SHARE_REFERRER_POLICY, "Cache-Control": "no-store"}
    try:
        comparison = comparison_store.resolve_share_token(session, token)
    except (comparison_store.ShareLinkNotFound, comparison_store.ShareLinkGone) as error:
        failure = error_response(error)
        return render(
            request, "share_gone.html", status_code=failure.status_code, headers=headers, detail=failure.detail
        )
    context = saved_comparison_context(request, session, comparison)
    context["compare_url"] = url_path(request.app, "shared_comparison", token=token)
    return render(request, "shared.html", headers=headers, **context)
