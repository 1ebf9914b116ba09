"""Domain errors → HTTP responses, registered on the app by ``api/error_pages.py``.

Routers let the errors of the store and domain modules rise. Each carries its own status and headers
(``emuplan/errors.py``'s ``EmuplanError``: ``http_status``, ``http_headers``, ``http_extra``), so this module
names none of them: a subclass's status wins over its base's as any class attribute does
(``ResultFileTooLarge``'s 413 over ``ResultFileError``'s 400). Bad input is a ``ValueError`` subclass by the
project's convention (CONTRIBUTING.md), hence 422 for any other ``ValueError``; everything else stays a 500,
which is always a bug.
"""

from dataclasses import dataclass, field

from emuplan.errors import EmuplanError

# The classes the app answers with their own response (``error_response``); anything else is a 500.
ANSWERED_ERRORS = (EmuplanError, ValueError)


@dataclass(frozen=True)
class ErrorResponse:
    status_code: int
    detail: str
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, object] = field(default_factory=dict)


def error_response(error: EmuplanError | ValueError) -> ErrorResponse:
    """The status, message and headers ``error`` answers with (pages render the same)."""
    if isinstance(error, EmuplanError):
        return ErrorResponse(error.http_status, str(error), headers=error.http_headers, extra=error.http_extra)
    if isinstance(error, ValueError):  # fields that cannot be planned, measured or stored as given
        return ErrorResponse(422, str(error))
    raise error  # a page caught what no answer is written for: the server's 500, a bug
