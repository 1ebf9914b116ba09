"""Planning: a ``PlanRequest`` → its ``PlanDocument``, the one service the CLI and the API call.

A model is a preset name, an uploaded model definition as ``model:<id>`` (its stored inventory is
planned, no file is read), or — on the CLI only (``allow_files``) — a model file. With a sandbox, a
PyTorch source (uploaded or a ``.py`` file) also gets the collectives PyTorch itself issues
(``captured``), run in the sandbox. It may import ``workload/``, ``sandbox/`` and ``store/``; only
``api/``, ``cli/`` and ``demo`` import it.
"""

from pathlib import Path
from typing import TYPE_CHECKING

from emuplan.workload.document import PlanDocument, PlanRequest
from emuplan.workload.inventory import ModelInventory
from emuplan.workload.planner import plan_workload
from emuplan.workload.sources import PYTORCH_SUFFIX, STORED_MODEL_PREFIX, resolve_model

# The database layer, the sandbox and PyTorch sources are imported where they are used: `emuplan plan`
# of a preset never opens the database nor runs the sandbox.
if TYPE_CHECKING:
    from sqlmodel import Session

    from emuplan.sandbox.runner import SandboxPolicy
    from emuplan.store.tables import Plan
    from emuplan.workload.pytorch_source import PytorchSourceOptions


def plan_request(
    request: PlanRequest,
    session: "Session | None" = None,
    sandbox: "SandboxPolicy | None" = None,
    *,
    allow_files: bool = False,
    pytorch_options: "PytorchSourceOptions | None" = None,
) -> tuple[PlanDocument, int | None]:
    """The plan document and the uploaded model definition's id (None for a preset or a file).

    ``pytorch_options`` (class, kwargs, input shape) read a ``.py`` file; an uploaded source keeps its own.
    """
    spec = request.model
    # The PyTorch source to capture from, when there is one: (text, file name, options).
    source: tuple[str, str, PytorchSourceOptions] | None = None
    if spec.startswith(STORED_MODEL_PREFIX):
        from emuplan.services.model_definitions import stored_definition

        definition = stored_definition(session, spec)
        inventory, model_definition_id = ModelInventory.model_validate(definition.inventory), definition.id
        if definition.source_kind == "pytorch" and definition.content is not None:
            from emuplan.workload import pytorch_source

            options = pytorch_source.PytorchSourceOptions.model_validate(definition.options)
            source = (definition.content.decode("utf-8"), definition.file_name or "model.py", options)
    else:
        inventory = resolve_model(spec, allow_files=allow_files, pytorch_options=pytorch_options, sandbox=sandbox)
        model_definition_id = None
        if allow_files and Path(spec).suffix == PYTORCH_SUFFIX and pytorch_options is not None:
            source = (Path(spec).read_text(), Path(spec).name, pytorch_options)
    document = plan_workload(request, inventory)
    if sandbox is not None and source is not None:
        from emuplan.workload.pytorch_source import capture_for_plan

        document = capture_for_plan(document, *source, sandbox)
    return document, model_definition_id


def create_plan(
    session: "Session", request: PlanRequest, name: str | None = None, sandbox: "SandboxPolicy | None" = None
) -> "Plan":
    """Plan and add the stored plan to the session; the caller's transaction commits it."""
    from emuplan.store.plans import save_document

    document, model_definition_id = plan_request(request, session, sandbox)
    return save_document(session, document, request, name, model_definition_id)
