"""What the routes answer besides their success, for OpenAPI: ``responses=`` of routers and routes.

Every error goes through ``api/errors.py`` as ``{"detail": message}``, except FastAPI's own request
validation (422 with a list of problems); a 422 is either. Downloads document their content types.
"""

from typing import Any

from pydantic import BaseModel

ERROR_DESCRIPTIONS = {
    400: "The body or an uploaded file cannot be read (malformed JSON; the message says what and where).",
    401: "Not signed in (when accounts are on).",
    403: "Signed in without the role this needs.",
    404: "No such item, or accounts are off.",
    409: "Conflicts with what is stored (a duplicate, a name taken, a job already running).",
    410: "The share link has expired or was revoked.",
    413: "The upload or its decompressed content is larger than the server accepts (a body without files: 1 MiB).",
    415: "A file kind the server does not read.",
    422: "A field that cannot be used as given.",
    503: "Busy or unavailable; Retry-After says when to try again.",
    507: "The server's disk filled while it worked (its temporary directory): the request can be tried again later.",
}
# Sent with a 503 that a retry can fix (a busy pool or sandbox).
RETRY_AFTER = {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "integer"}}}


class ErrorMessage(BaseModel):
    detail: str


class FieldProblem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class FieldProblems(BaseModel):
    """FastAPI's request validation: one entry per field that failed."""

    detail: list[FieldProblem]


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error answers ``statuses`` as ``responses=`` documents them."""
    return {
        status: {
            "model": ErrorMessage | FieldProblems if status == 422 else ErrorMessage,
            "description": ERROR_DESCRIPTIONS[status],
            **({"headers": RETRY_AFTER} if status == 503 else {}),
        }
        for status in statuses
    }


# A JSON or YAML file is a document to a client that parses it by its content type (schemathesis does): any value.
PARSED_MEDIA_TYPES = ("application/json", "application/yaml")


def attachment(file_name: str) -> dict[str, str]:
    """The header that makes a download a file named ``file_name`` (the answer that ``download`` documents)."""
    return {"Content-Disposition": f'attachment; filename="{file_name}"'}


def download(*media_types: str, status: int = 200) -> dict[int | str, dict[str, Any]]:
    """A success answered as a file of one of ``media_types`` (text, binary, or a JSON or YAML document)."""
    return {
        status: {
            "description": "The file, as an attachment.",
            "content": {
                media_type: {"schema": {} if media_type in PARSED_MEDIA_TYPES else {"type": "string"}}
                for media_type in media_types
            },
        }
    }


# Every router that needs a role answers 401 and 403 when accounts are on.
SIGNED_IN = (401, 403)
