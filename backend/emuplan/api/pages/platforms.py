"""/platforms: the platform profiles page, over ``services.platforms`` (the JSON: ``api/routes/platforms.py``); its
form is ``Platform``'s fields (``workload.platform_fields``).

The page's add, edit and delete are plain HTML forms posted to this server (no script), like the account page.
"""

from typing import Annotated, NamedTuple

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, Field, create_model

from emuplan.api.access import requires_roles
from emuplan.api.deps import ReadSessionDep, WriteSessionDep
from emuplan.api.errors import error_response
from emuplan.api.render import render
from emuplan.services import platforms as service
from emuplan.store.platforms import BuiltinPlatform
from emuplan.workload.platform_fields import PLATFORM_FIELDS, TEXT_LENGTH, PlatformField
from emuplan.workload.platforms import Platform

router = APIRouter(include_in_schema=False, dependencies=requires_roles(page=True))


# A list's lines, newlines included, at their longest; a field of no length of its own is a number or a choice.
LIST_LENGTH = 20_000


class FormInput(NamedTuple):
    """How the page's form asks for one ``PLATFORM_FIELDS`` field: ``control`` is input, select or textarea;
    ``attributes`` the input's own (type, bounds, placeholder); ``options`` a select's (value, text)."""

    name: str
    label: str
    control: str
    required: bool = False
    attributes: tuple[tuple[str, str], ...] = ()
    options: tuple[tuple[str, str], ...] = ()


def _form_input(name: str, spec: PlatformField) -> FormInput:
    left_out = (("", spec.left_out),) if spec.left_out else ()
    if spec.type is bool:
        return FormInput(name, spec.title, "select", options=(*left_out, ("true", "yes"), ("false", "no")))
    if spec.choices:
        return FormInput(name, spec.title, "select", options=(*left_out, *spec.choices.items()))
    if spec.type is list:
        return FormInput(name, f"{spec.title}, one a line", "textarea", attributes=(("maxlength", str(LIST_LENGTH)),))
    if spec.type is str:
        pattern = spec.pattern and spec.pattern.removeprefix("^").removesuffix("$")  # HTML anchors it itself
        attributes = {"type": "text", "maxlength": spec.max_length, "pattern": pattern}
    else:
        lowest = spec.minimum if spec.minimum is not None else spec.exclusive_minimum
        attributes = {"type": "number", "min": lowest, "max": spec.maximum, "step": "1" if spec.type is int else "any"}
    # A required field's placeholder is an example; an optional one's, the default it takes when left blank.
    attributes["placeholder"] = f"e.g. {spec.example}" if spec.example else None if spec.required else spec.default
    given = {key: value for key, value in attributes.items() if value is not None}
    texts = tuple((key, f"{value:.15g}" if isinstance(value, float) else str(value)) for key, value in given.items())
    return FormInput(name, spec.title, "input", spec.required, texts)


FORM_INPUTS = tuple(_form_input(name, spec) for name, spec in PLATFORM_FIELDS.items())


class PlatformFormRules(BaseModel):
    """The page's form as posted: text as typed, checked by ``Platform`` when stored (a mistake is shown on the
    page with what was typed kept). A list: one item a line. ``PlatformForm`` adds the fields."""

    def values(self) -> dict:
        """The fields filled in (blank ones left to ``Platform``: its default, or 'Field required')."""
        values = {}
        for name, spec in PLATFORM_FIELDS.items():
            text = getattr(self, name)
            if spec.type is list:
                values[name] = [line.strip() for line in text.splitlines() if line.strip()]
            elif text.strip():
                values[name] = text.strip()
        return values

    @classmethod
    def of(cls, platform: Platform) -> "PlatformFormRules":
        return cls(**{name: _as_typed(value) for name, value in dict(platform).items()})


def _as_typed(value: object) -> str:
    """A field's value as the form shows it: a list one item a line, a flag 'true' or 'false'."""
    if isinstance(value, list):
        return "\n".join(value)
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def _form_length(spec: PlatformField) -> int:
    """The longest text the form takes for the field: room for text ``Platform`` then refuses with its own
    message (shown on the page), rather than the form's."""
    return LIST_LENGTH if spec.type is list else TEXT_LENGTH if spec.type is str and not spec.choices else 30


PlatformForm = create_model(
    "PlatformForm",
    __base__=PlatformFormRules,
    **{name: (str, Field(default="", max_length=_form_length(spec))) for name, spec in PLATFORM_FIELDS.items()},
)


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
        entries=service.list_platforms(session),
        form=form or PlatformForm(),
        inputs=FORM_INPUTS,
        editing=editing,
        error=error,
        notice=notice,
    )


@router.get("/platforms", name="platforms_page", response_class=HTMLResponse)
def platforms_page(request: Request, session: ReadSessionDep, edit: str = "", copy: str = "") -> HTMLResponse:
    """Every profile with its figures and sources. ``?edit=NAME`` fills the form with a stored profile to change
    it; ``?copy=NAME`` with any profile's figures (a built-in's too) to add one like it under a new name."""
    if edit:
        entry = service.get_platform(session, edit)
        if not entry.builtin:
            return _platforms_page(request, session, form=PlatformForm.of(entry.platform), editing=edit)
        # A built-in cannot be edited: its figures are offered as a new profile instead, saying why.
        refusal = error_response(BuiltinPlatform(edit, "edited"))
        return _platforms_page(request, session, form=_copy_of(entry.platform), error=refusal.detail)
    if copy:
        return _platforms_page(request, session, form=_copy_of(service.get_platform(session, copy).platform))
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
        entry = service.create_platform(session, form.values())
    except ValueError as error:
        return _refused(request, session, error, form, editing=None)
    session.commit()
    return _platforms_page(request, session, notice=f"Platform {entry.platform.name} added.")


@router.post("/platforms/{name}", name="update_platform_form", response_class=HTMLResponse)
def update_platform_form(name: str, request: Request, session: WriteSessionDep, form: PlatformFormDep) -> HTMLResponse:
    try:
        entry = service.update_platform(session, name, form.values())
    except ValueError as error:
        return _refused(request, session, error, form, editing=name)
    session.commit()
    return _platforms_page(request, session, notice=f"Platform {entry.platform.name} saved.")


@router.post("/platforms/{name}/delete", name="delete_platform_form", response_class=HTMLResponse)
def delete_platform_form(name: str, request: Request, session: WriteSessionDep) -> HTMLResponse:
    try:
        deleted = service.delete_platform(session, name)
    except BuiltinPlatform as error:
        return _refused(request, session, error, PlatformForm(), editing=None)
    session.commit()
    return _platforms_page(request, session, notice=deleted.message())
