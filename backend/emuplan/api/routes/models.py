"""Model definitions: upload (config.json, .safetensors, .onnx, PyTorch .py), list, read.

Glue only: reading lives in ``workload/model_files.py`` (PyTorch source runs in the sandbox),
storing and resolving in ``services/model_definitions.py``. Errors: unusable form fields → 422; a file that cannot be
read as a model, or a model the sandbox stopped → 400; pickles and unknown kinds → 415; over the
upload limit → 413 (counted while streaming); no bubblewrap for a .py upload → 503.
"""

from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, UploadFile
from pydantic import ValidationError

from emuplan.api.access import requires_roles
from emuplan.api.deps import (
    DatabaseInt,
    ListLimit,
    ListOffset,
    ReadSessionDep,
    SettingsDep,
    WriteSessionDep,
    response_model_of,
)
from emuplan.api.responses import SIGNED_IN, errors
from emuplan.sandbox.runner import SandboxPolicy
from emuplan.services import model_definitions as model_service
from emuplan.store.tables import ModelDefinition
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.model_files import check_model_file_name
from emuplan.workload.pytorch_source import PytorchSourceError, PytorchSourceOptions, options_from_text

router = APIRouter(
    prefix="/api/models",
    tags=["models"],
    dependencies=requires_roles(),
    responses=errors(400, *SIGNED_IN, 404, 413, 415, 422, 503),
)


ModelDefinitionSummary = response_model_of(model_service.ListedModelDefinition, "ModelDefinitionSummary")


class ModelDefinitionPublic(ModelDefinitionSummary):
    inventory: ModelInventory


def _summary(definition: ModelDefinition) -> ModelDefinitionSummary:
    return ModelDefinitionSummary(**definition.model_dump(exclude={"content", "inventory"}))


def _public(definition: ModelDefinition) -> ModelDefinitionPublic:
    return ModelDefinitionPublic(
        **_summary(definition).model_dump(), inventory=model_service.definition_inventory(definition)
    )


def _pytorch_options(
    model_class: str | None, model_kwargs: str | None, input_shape: str | None, input_dtype: str, label_dtype: str
) -> PytorchSourceOptions:
    """The form fields a .py upload needs, checked before the sandbox starts (422 when unusable)."""
    missing = [field for field, value in (("model_class", model_class), ("input_shape", input_shape)) if not value]
    if missing:
        raise HTTPException(422, detail=f"a PyTorch source upload needs the form field(s) {', '.join(missing)}")
    try:
        return options_from_text(model_class, model_kwargs, input_shape, input_dtype, label_dtype)
    except (PytorchSourceError, ValidationError) as error:
        raise HTTPException(422, detail=str(error)) from None


@router.post("", name="upload_model", status_code=201)
def upload_model(
    session: WriteSessionDep,
    settings: SettingsDep,
    file: Annotated[UploadFile, File(description="config.json, .safetensors (header or whole), .onnx or .py.")],
    name: Annotated[str | None, Form(max_length=200)] = None,
    model_class: Annotated[str | None, Form(description=".py: the nn.Module class to build.")] = None,
    model_kwargs: Annotated[str | None, Form(description=".py: constructor keyword arguments, JSON.")] = None,
    input_shape: Annotated[str | None, Form(description=".py: one sample's shape, e.g. 1,28,28.")] = None,
    input_dtype: Annotated[str, Form()] = "float32",
    label_dtype: Annotated[str, Form()] = "int64",
) -> ModelDefinitionPublic:
    file_name = file.filename or "upload"
    suffix = check_model_file_name(file_name)
    pytorch_options = (
        _pytorch_options(model_class, model_kwargs, input_shape, input_dtype, label_dtype) if suffix == ".py" else None
    )
    definition = model_service.create_model_definition(
        session, file.file, file_name, SandboxPolicy.from_settings(settings), name, pytorch_options
    )
    session.commit()
    return _public(definition)


@router.get("", name="list_models")
def list_models(
    session: ReadSessionDep,
    limit: ListLimit = 100,
    offset: ListOffset = 0,
) -> list[ModelDefinitionSummary]:
    return [
        ModelDefinitionSummary(**listed._asdict())
        for listed in model_service.list_model_definitions(session, limit, offset)
    ]


@router.get("/{definition_id}", name="get_model")
def get_model(definition_id: DatabaseInt, session: ReadSessionDep) -> ModelDefinitionPublic:
    return _public(model_service.get_model_definition(session, definition_id))
