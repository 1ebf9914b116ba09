"""Domain errors → HTTP responses: the one table, registered on the app by ``api/error_pages.py``.

Routers let the errors of the store and domain modules rise; this table turns each into its status
and ``{"detail": message}``. Starlette picks the handler of the most specific class in an error's
MRO, so a subclass listed here wins over its base (``ResultFileTooLarge`` over ``ResultFileError``).
Bad input is a ``ValueError`` subclass by the project's convention (CONTRIBUTING.md), hence 422 for
any other ``ValueError``; everything not listed stays a 500, which is always a bug.
"""

from dataclasses import dataclass, field

from emuplan.api.access import NotSignedIn, RoleMissing
from emuplan.api.routes.comparisons import SHARE_REFERRER_POLICY
from emuplan.api.simulate import SimulationNotFinished
from emuplan.api.simulation_jobs import SimulationBusy
from emuplan.measure.workload import MeasurementError
from emuplan.results.budget import ImportDiskFull, ImportsBusy
from emuplan.results.canonical import ResultFileError, ResultFileTooLarge
from emuplan.sandbox.runner import RETRY_AFTER_S, SandboxBusy, SandboxUnavailable
from emuplan.simulate.astra_sim import SimulatorUnavailable
from emuplan.store.accounts import AccountExists, LastAdmin, SignInRateLimited, SignInRefused
from emuplan.store.comparisons import ShareLinkGone
from emuplan.store.db import DatabaseBusy
from emuplan.store.measurement_jobs import MeasurementBusy
from emuplan.store.plan_deletion import PlanInUse
from emuplan.store.platforms import BuiltinPlatform, PlatformExists
from emuplan.store.relabel_jobs import RelabelBusy
from emuplan.store.rows import NotFound
from emuplan.store.runs import DuplicateRun
from emuplan.workload.model_files import ModelFileError, UnsupportedModelFile

ERROR_STATUS: dict[type[Exception], int] = {
    NotSignedIn: 401,
    SignInRefused: 401,
    RoleMissing: 403,
    SignInRateLimited: 429,
    NotFound: 404,
    DuplicateRun: 409,
    AccountExists: 409,
    LastAdmin: 409,
    PlatformExists: 409,
    BuiltinPlatform: 409,
    MeasurementBusy: 409,
    RelabelBusy: 409,
    SimulationBusy: 409,
    SimulationNotFinished: 409,
    PlanInUse: 409,
    ShareLinkGone: 410,
    ResultFileTooLarge: 413,
    UnsupportedModelFile: 415,
    # A file that cannot be read: a result file or a model definition.
    ResultFileError: 400,
    ModelFileError: 400,
    SandboxUnavailable: 503,
    SandboxBusy: 503,
    SimulatorUnavailable: 503,
    ImportsBusy: 503,
    DatabaseBusy: 503,
    # The server's disk, not the request, is short: Insufficient Storage.
    ImportDiskFull: 507,
    # Fields that cannot be planned, measured or stored as given.
    MeasurementError: 422,
    ValueError: 422,
}


@dataclass(frozen=True)
class ErrorResponse:
    status_code: int
    detail: str
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)


def error_response(error: Exception) -> ErrorResponse:
    """The status, message and headers ``error`` answers with (pages render the same)."""
    status = next(ERROR_STATUS[cls] for cls in type(error).__mro__ if cls in ERROR_STATUS)
    if isinstance(error, ShareLinkGone):
        return ErrorResponse(
            status,
            f"{error.reason.capitalize()}: ask its owner for a new one.",
            headers={"Referrer-Policy": SHARE_REFERRER_POLICY},
        )
    if isinstance(error, (MeasurementBusy, RelabelBusy)):
        return ErrorResponse(status, str(error), headers={"Location": error.location})
    if isinstance(error, SandboxBusy):
        # Refused at once instead of holding a server thread until a slot frees: say when to retry.
        return ErrorResponse(status, str(error), headers={"Retry-After": str(RETRY_AFTER_S)})
    if isinstance(error, ImportsBusy | DatabaseBusy):
        return ErrorResponse(status, str(error), headers={"Retry-After": str(error.retry_after_s)})
    if isinstance(error, NotSignedIn):
        return ErrorResponse(status, str(error), headers={"WWW-Authenticate": "Bearer"})
    if isinstance(error, SignInRateLimited):
        return ErrorResponse(status, str(error), headers={"Retry-After": str(error.retry_after_s)})
    if isinstance(error, DuplicateRun):
        return ErrorResponse(status, str(error), extra={"existing_run_id": error.existing_run_id})
    return ErrorResponse(status, str(error))
