"""/platforms: the platform profiles page, over ``store.platforms`` (the JSON: ``api/routes/platforms.py``).

The page's add, edit and delete are plain HTML forms posted to this server (no script), like the account page.
"""

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field

from emuplan.api.access import requires_roles
from emuplan.api.deps import ReadSessionDep, WriteSessionDep
from emuplan.api.errors import error_response
from emuplan.api.render import render
from emuplan.store import platforms as store
from emuplan.workload.platforms import Platform

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


class PlatformForm(BaseModel):
    """The page's form as posted: text as typed, checked by ``Platform`` when stored (a mistake is shown on the
    page with what was typed kept). ``sources``: one a line."""

    name: str = Field(default="", max_length=200)
    title: str = Field(default="", max_length=200)
    gpu_model: str = Field(default="", max_length=200)
    gpus_per_node: str = Field(default="", max_length=30)
    scale_up_domain_gpus: str = Field(default="", max_length=30)
    scale_up_fabric: str = Field(default="", max_length=200)
    scale_up_gb_s: str = Field(default="", max_length=30)
    scale_out_fabric: str = Field(default="", max_length=200)
    nics_per_node: str = Field(default="", max_length=30)
    nic_gbit_s: str = Field(default="", max_length=30)
    gpu_generation: str = Field(default="", max_length=30)
    scale_up_link: str = Field(default="", max_length=30)
    nvls: str = Field(default="", max_length=30)
    degraded_below_pct: str = Field(default="", max_length=30)
    fail_below_pct: str = Field(default="", max_length=30)
    sources: str = Field(default="", max_length=20_000)

    def values(self) -> dict:
        """The fields filled in (blank ones left to ``Platform``: its default, or 'Field required')."""
        typed = {name: text.strip() for name, text in self.model_dump(exclude={"sources"}).items() if text.strip()}
        return {**typed, "sources": [line.strip() for line in self.sources.splitlines() if line.strip()]}

    @classmethod
    def of(cls, platform: Platform) -> "PlatformForm":
        typed = {
            name: f"{value:g}"
            if isinstance(value, float)
            else str(value).lower()
            if isinstance(value, bool)
            else str(value)
            for name, value in dict(platform).items()
            if name != "sources"
        }
        return cls(**typed, sources="\n".join(platform.sources))


PlatformFormDep = Annotated[PlatformForm, Form()]


def _platforms_page(
    request: Request,
    session,
    *,
    form: PlatformForm | None = None,
    editing: str | None = None,
    error: str | None = None,
    notice: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    return render(
        request,
        "platforms.html",
        status_code=status_code,
        nav="platforms",
        entries=store.list_platforms(session),
        form=form or PlatformForm(),
        editing=editing,
        error=error,
        notice=notice,
    )


@router.get("/platforms", name="platforms_page", response_class=HTMLResponse)
def platforms_page(request: Request, session: ReadSessionDep, edit: str = "", copy: str = "") -> HTMLResponse:
    """Every profile with its figures and sources. ``?edit=NAME`` fills the form with a stored profile to change
    it; ``?copy=NAME`` with any profile's figures (a built-in's too) to add one like it under a new name."""
    if edit:
        entry = store.get_platform(session, edit)
        if not entry.builtin:
            return _platforms_page(request, session, form=PlatformForm.of(entry.platform), editing=edit)
        # A built-in cannot be edited: its figures are offered as a new profile instead, saying why.
        refusal = error_response(store.BuiltinPlatform(edit, "edited"))
        return _platforms_page(request, session, form=_copy_of(entry.platform), error=refusal.detail)
    if copy:
        return _platforms_page(request, session, form=_copy_of(store.get_platform(session, copy).platform))
    return _platforms_page(request, session)


def _copy_of(platform: Platform) -> PlatformForm:
    return PlatformForm.of(platform).model_copy(update={"name": ""})


def _refused(request: Request, session, error: ValueError, form: PlatformForm, editing: str | None) -> HTMLResponse:
    session.rollback()
    failure = error_response(error)
    return _platforms_page(
        request, session, form=form, editing=editing, error=failure.detail, status_code=failure.status_code
    )


@router.post("/platforms", name="create_platform_form", response_class=HTMLResponse)
def create_platform_form(request: Request, session: WriteSessionDep, form: PlatformFormDep) -> HTMLResponse:
    try:
        entry = store.create_platform(session, form.values())
    except ValueError as error:
        return _refused(request, session, error, form, editing=None)
    session.commit()
    return _platforms_page(request, session, notice=f"Platform {entry.platform.name} added.")


@router.post("/platforms/{name}", name="update_platform_form", response_class=HTMLResponse)
def update_platform_form(name: str, request: Request, session: WriteSessionDep, form: PlatformFormDep) -> HTMLResponse:
    try:
        entry = store.update_platform(session, name, form.values())
    except ValueError as error:
        return _refused(request, session, error, form, editing=name)
    session.commit()
    return _platforms_page(request, session, notice=f"Platform {entry.platform.name} saved.")


@router.post("/platforms/{name}/delete", name="delete_platform_form", response_class=HTMLResponse)
def delete_platform_form(name: str, request: Request, session: WriteSessionDep) -> HTMLResponse:
    try:
        deleted = store.delete_platform(session, name)
    except store.BuiltinPlatform as error:
        return _refused(request, session, error, PlatformForm(), editing=None)
    session.commit()
    return _platforms_page(request, session, notice=deleted.message())
