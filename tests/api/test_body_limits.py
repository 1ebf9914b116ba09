"""A request without files is read whole and parsed into Python objects at up to 50 times its size (21 MB of
JSON took the server 1.05 GB above its start, and 23 s to answer 422): such a body is refused past 1 MiB with
413, before it is read; a file upload keeps EMUPLAN_MAX_UPLOAD_BYTES."""

import pytest
from fastapi.testclient import TestClient

from emuplan.api.uploads import MAX_OTHER_BODY_BYTES

pytestmark = pytest.mark.both_databases

REFUSED = {
    "detail": f"The request body is larger than the {MAX_OTHER_BODY_BYTES} bytes a request without files may send."
}


def empty_objects(count: int) -> bytes:
    return b'{"model": [' + b"{}," * count + b"{}]}"


def test_a_json_body_past_one_mib_is_refused_before_it_is_read(client: TestClient) -> None:
    body = empty_objects(7_000_000)
    assert len(body) == 21_000_015
    refused = client.post("/api/plans/preview", content=body, headers={"Content-Type": "application/json"})
    assert (refused.status_code, refused.json()) == (413, REFUSED)


def test_a_json_body_sent_without_its_length_is_stopped_at_one_mib(client: TestClient) -> None:
    def chunks():
        for _ in range(64):
            yield b" " * 65536

    refused = client.post("/api/comparisons", content=chunks(), headers={"Content-Type": "application/json"})
    assert (refused.status_code, refused.json()) == (413, REFUSED)


def test_a_json_body_under_one_mib_is_read_as_before(client: TestClient) -> None:
    answer = client.post(
        "/api/plans/preview",
        content=b'{"model": "fashion-mnist-mlp", "strategy": "data"}'.ljust(MAX_OTHER_BODY_BYTES),
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 200, answer.text


def test_a_file_upload_past_one_mib_is_still_imported(client: TestClient) -> None:
    csv = b"iteration,size,time_ms\n" + b"".join(b"%d,8,1.5\n" % i for i in range(200_000))
    assert len(csv) > 2 * MAX_OTHER_BODY_BYTES
    assert client.post("/api/runs", files={"file": ("big.csv", csv, "text/csv")}).status_code == 201


def test_every_operation_documents_the_413(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    undocumented = [
        f"{method.upper()} {path}"
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "413" not in operation["responses"]
    ]
    assert undocumented == []
