"""Several files in one upload: one training job's records become one observed run (201, all or nothing), other
files one run each (200, an outcome per file, one refused never stopping the others)."""

import gzip

import pytest
from fastapi.testclient import TestClient

from paths import NCCL_TESTS, RESULTS, SHARED_NCCL

pytestmark = pytest.mark.both_databases
INSPECTOR = [
    RESULTS / "nccl-inspector" / name for name in ("constructed-gpu-a-pid101.log", "constructed-gpu-b-pid202.log")
]
LOGS = [
    NCCL_TESTS / "gtx1080-2gpu-allgather-pre2.13.txt",
    SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt",
]


def parts(*files: tuple[str, bytes]) -> list[tuple[str, tuple[str, bytes]]]:
    return [("file", file) for file in files]


def test_an_inspector_dump_per_process_uploaded_together_is_one_observed_run(client: TestClient) -> None:
    # The second one gzipped: each file is detected on its own content.
    files = [
        (INSPECTOR[0].name, INSPECTOR[0].read_bytes()),
        (INSPECTOR[1].name, gzip.compress(INSPECTOR[1].read_bytes())),
    ]
    upload = client.post("/api/runs", files=parts(*files), data={"name": "job 4242", "tags": "training"})
    assert upload.status_code == 201, upload.text
    run = upload.json()
    assert (run["id"], run["name"], run["origin"], run["source_format"]) == (
        1,
        "job 4242",
        "observed",
        "nccl-inspector",
    )
    assert (run["file_name"], run["ranks"], run["hosts"], run["tags"]) == (
        "constructed-gpu-a-pid101.log and 1 more",
        2,
        2,
        ["training"],
    )
    assert [group["label"] for group in run["summary"]["groups"]] == [
        "all_reduce · 1048576 B · 0xc0ffee",
        "all_gather · 131072 B · 0xc0ffee",
    ]
    again = client.post("/api/runs", files=parts(*reversed(files)))
    assert again.status_code == 409
    assert again.json()["existing_run_id"] == 1


def test_a_job_with_a_file_cut_short_stores_nothing_and_names_the_file(client: TestClient) -> None:
    first = INSPECTOR[1].read_bytes()
    cut = first[: first.index(b"\n") + 120]
    upload = client.post(
        "/api/runs", files=parts((INSPECTOR[0].name, INSPECTOR[0].read_bytes()), ("gpu-b-pid202.log", cut))
    )
    assert upload.status_code == 400
    assert upload.json()["detail"].startswith("gpu-b-pid202.log: line 2: not a JSON object: ")
    assert client.get("/api/runs").json() == []


def test_other_files_uploaded_together_become_one_run_each_with_an_outcome_per_file(client: TestClient) -> None:
    client.post("/api/runs", files={"file": ("earlier.txt", LOGS[1].read_bytes())})
    files = [
        (LOGS[0].name, LOGS[0].read_bytes()),
        ("empty.csv", b""),
        (LOGS[1].name, LOGS[1].read_bytes()),
        ("per-iteration.csv.gz", gzip.compress((RESULTS / "generated-per-iteration.csv").read_bytes())),
    ]
    upload = client.post("/api/runs", files=parts(*files), data={"tags": "batch", "platform": "nope"})
    assert upload.status_code == 200
    refused_platform = "platform: no platform named 'nope' (GET /api/platforms lists them)"
    assert upload.json() == [
        {"file": LOGS[0].name, "outcome": "refused", "run_id": None, "detail": refused_platform},
        {"file": "empty.csv", "outcome": "refused", "run_id": None, "detail": "empty.csv: the file is empty"},
        {
            "file": LOGS[1].name,
            "outcome": "duplicate",
            "run_id": 1,
            "detail": f"{LOGS[1].name}: identical content was already imported as run 1 ('earlier.txt')",
        },
        {"file": "per-iteration.csv.gz", "outcome": "refused", "run_id": None, "detail": refused_platform},
    ]
    upload = client.post("/api/runs", files=parts(*files), data={"tags": "batch"})
    assert [(each["outcome"], each["run_id"]) for each in upload.json()] == [
        ("stored", 2),
        ("refused", None),
        ("duplicate", 1),
        ("stored", 3),
    ]
    listed = client.get("/api/runs").json()
    assert [(run["id"], run["name"], run["source_format"], run["tags"]) for run in listed] == [
        (3, "per-iteration.csv.gz", "per-iteration", ["batch"]),
        (2, LOGS[0].name, "nccl-tests", ["batch"]),
        (1, "earlier.txt", "nccl-tests", []),
    ]


def test_job_says_whether_several_files_are_one_job(client: TestClient) -> None:
    inspector = [(path.name, path.read_bytes()) for path in INSPECTOR]
    each = client.post("/api/runs", files=parts(*inspector), data={"job": "false"})
    assert each.status_code == 200
    assert [(o["file"], o["outcome"], o["run_id"]) for o in each.json()] == [
        (INSPECTOR[0].name, "stored", 1),
        (INSPECTOR[1].name, "stored", 2),
    ]
    logs = [(path.name, path.read_bytes()) for path in LOGS]
    job = client.post("/api/runs", files=parts(*logs), data={"job": "true"})
    assert (job.status_code, job.json()) == (
        400,
        {"detail": f"{LOGS[0].name}: neither an NCCL Inspector dump nor a PyTorch profiler trace"},
    )
    named = client.post("/api/runs", files=parts(*logs), data={"name": "two logs"})
    assert (named.status_code, named.json()) == (
        422,
        {"detail": "name: names one run; with several files each is named by its file name"},
    )
    assert len(client.get("/api/runs").json()) == 2


def test_the_api_documents_both_answers(client: TestClient) -> None:
    upload = client.get("/openapi.json").json()["paths"]["/api/runs"]["post"]
    assert (
        upload["responses"]["201"]["description"] == "One run: the one file's, or one job's files' (an observed run)."
    )
    assert upload["responses"]["200"]["content"]["application/json"]["schema"] == {
        "type": "array",
        "items": {"$ref": "#/components/schemas/UploadOutcome"},
        "title": "Response 200 Upload Run Api Runs Post",
    }
    file_field = upload["requestBody"]["content"]["multipart/form-data"]["schema"]["properties"]["file"]
    assert (file_field["type"], file_field["items"], file_field["minItems"]) == (
        "array",
        {"type": "string", "format": "binary"},
        1,
    )


def test_more_files_than_one_upload_takes_are_422_and_nothing_is_stored(client: TestClient) -> None:
    files = [(f"rank{rank}.csv", b"iteration,duration_us\n0,10\n") for rank in range(4097)]
    upload = client.post("/api/runs", files=parts(*files))
    assert (upload.status_code, upload.json()) == (422, {"detail": "file: more than 4096 files in one upload"})
    assert client.get("/api/runs").json() == []
