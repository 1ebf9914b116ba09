"""/openapi.json: the API's description (FastAPI's docs routes are off, see main.py)."""

from fastapi import APIRouter, Request

from emuplan.api.access import requires_roles

# The API's description is read like the API: with sign-in on, by a signed-in viewer (or an API token).
router = APIRouter(include_in_schema=False, dependencies=requires_roles())


@router.get("/openapi.json", name="openapi_document")
def openapi_document(request: Request) -> dict:
    return request.app.openapi()
