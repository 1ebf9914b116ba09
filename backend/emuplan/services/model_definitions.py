"""Stored model definitions: read an upload into its inventory and keep it in one row.

The API and the CLI both call these functions; reading (and for PyTorch source, the sandbox run)
happens before anything is added to the session, so a bad file leaves nothing behind.
"""

import hashlib
from datetime import datetime
from typing import BinaryIO, NamedTuple

from sqlmodel import Session

from emuplan.sandbox.runner import SandboxPolicy
from emuplan.store.rows import NotFound, get_row, newest_columns
from emuplan.store.tables import ModelDefinition
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.model_files import read_model_file
from emuplan.workload.pytorch_source import PytorchSourceOptions
from emuplan.workload.sources import STORED_MODEL_PREFIX, UnknownModelError, resolve_model


class ModelDefinitionNotFound(NotFound):
    pass


def stored_definition(session: Session | None, spec: str) -> ModelDefinition:
    """The uploaded model definition a plan names as ``model:<id>``."""
    raw_id = spec.removeprefix(STORED_MODEL_PREFIX)
    definition = session.get(ModelDefinition, int(raw_id)) if session is not None and raw_id.isdigit() else None
    if definition is None:
        raise UnknownModelError(f"model: no uploaded model definition {spec!r}")
    return definition


def inventory_for_spec(session: Session | None, spec: str) -> ModelInventory:
    """A preset's or an uploaded model definition's (``model:<id>``) inventory; never a file."""
    if spec.startswith(STORED_MODEL_PREFIX):
        return ModelInventory.model_validate(stored_definition(session, spec).inventory)
    return resolve_model(spec, allow_files=False)


def create_model_definition(
    session: Session,
    stream: BinaryIO,
    file_name: str,
    policy: SandboxPolicy,
    name: str | None = None,
    pytorch_options: PytorchSourceOptions | None = None,
) -> ModelDefinition:
    """Adds the definition to the session; the caller's transaction commits it."""
    model_file = read_model_file(stream, file_name, name, policy, pytorch_options)
    definition = ModelDefinition(
        name=model_file.inventory.name,
        source_kind=model_file.source_kind,
        file_name=file_name,
        content_sha256=hashlib.sha256(model_file.content).hexdigest(),
        content=model_file.content,
        options=model_file.options,
        inventory=model_file.inventory.model_dump(mode="json"),
        parameter_count=model_file.inventory.parameter_count,
    )
    session.add(definition)
    session.flush()
    return definition


class ListedModelDefinition(NamedTuple):
    """An item of ``GET /api/models`` and of the plan form's uploaded models: not the content or inventory."""

    id: int
    name: str
    source_kind: str
    file_name: str | None
    content_sha256: str
    parameter_count: int
    options: dict
    created_at: datetime


def list_model_definitions(session: Session, limit: int = 100, offset: int = 0) -> list[ListedModelDefinition]:
    return newest_columns(session, ModelDefinition, ListedModelDefinition, limit, offset)


def get_model_definition(session: Session, definition_id: int) -> ModelDefinition:
    return get_row(session, ModelDefinition, definition_id, ModelDefinitionNotFound, "model definition")


def definition_inventory(definition: ModelDefinition) -> ModelInventory:
    return ModelInventory.model_validate(definition.inventory)
