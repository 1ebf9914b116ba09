"""/api/platforms: platform profiles as JSON, over ``services.platforms`` (the /platforms page:
``api/pages/platforms.py``)."""

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from emuplan.api.access import requires_roles
from emuplan.api.deps import ReadSessionDep, WriteSessionDep
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.services import platforms as service
from emuplan.workload.platforms import Platform

router = APIRouter(
    prefix="/api/platforms",
    tags=["platforms"],
    dependencies=requires_roles(),
    responses=errors(400, *SIGNED_IN, 404, 409, 422),
)


class PlatformPublic(Platform):
    # The store's document carries the computed scale_out_gb_s too: ignored on the way in, computed on the way out.
    model_config = ConfigDict(extra="ignore", frozen=True)

    builtin: bool = Field(description="Built into emuplan (cited figures, read-only) rather than added by a user.")
    runs: int = Field(description="Runs that name this platform.")
    plans: int = Field(description="Plans that name this platform.")


class PlatformDeleted(BaseModel):
    name: str
    runs_detached: int = Field(description="Runs that named the platform and now have none.")
    plans_detached: int = Field(description="Plans that named the platform and now have none.")


@router.get("", name="list_platforms", response_model=list[PlatformPublic])
def list_platforms(session: ReadSessionDep) -> list[dict]:
    """The built-in profiles, then those users added, with how many runs and plans name each."""
    return [entry.document() for entry in service.list_platforms(session)]


@router.post("", name="create_platform", status_code=201, response_model=PlatformPublic)
def create_platform(body: Platform, session: WriteSessionDep) -> dict:
    entry = service.create_platform(session, dict(body))
    session.commit()
    return entry.document()


@router.get("/{name}", name="get_platform", response_model=PlatformPublic)
def get_platform(name: str, session: ReadSessionDep) -> dict:
    return service.get_platform(session, name).document()


@router.put("/{name}", name="update_platform", response_model=PlatformPublic)
def update_platform(name: str, body: Platform, session: WriteSessionDep) -> dict:
    """Replaces a stored profile's figures; another ``name`` in the body renames it, on its runs and plans too.
    A built-in is refused with 409."""
    entry = service.update_platform(session, name, dict(body))
    session.commit()
    return entry.document()


@router.delete("/{name}", name="delete_platform", response_model=PlatformDeleted)
def delete_platform(name: str, session: WriteSessionDep) -> dict:
    """Deletes a stored profile; the runs and plans that named it are left with no platform (counted in the
    answer). A built-in is refused with 409."""
    deleted = service.delete_platform(session, name)
    session.commit()
    return deleted.document()
