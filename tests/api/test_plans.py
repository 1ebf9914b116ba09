"""The plans API: preview, store, list, read, KCCB export, presets; bad input stores nothing."""

import json

import pytest
from fastapi.testclient import TestClient
from sqlmodel import func, select

from emuplan.store import plans as plan_store
from emuplan.store.db import Database
from emuplan.store.tables import ModelDefinition, Plan
from emuplan.workload.hf_config import inventory_from_hf_config
from paths import LLAMA_2_7B_CONFIG
from sql_capture import sent_queries

pytestmark = pytest.mark.both_databases

LLAMA_2_7B_CONFIG = json.loads(LLAMA_2_7B_CONFIG.read_text())


def plan_count(database: Database) -> int:
    with database.read_session() as session:
        return session.exec(select(func.count()).select_from(Plan)).one()


def test_the_plan_list_reads_and_answers_only_each_plans_summary(client: TestClient, database: Database) -> None:
    first = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "name": "first"}).json()
    second = client.post("/api/plans", json={"model": "gpt2", "strategy": "tensor", "tp": 2}).json()
    summary = ("id", "name", "model_name", "model_definition_id", "strategy", "mode", "trials", "platform", "tags",
               "created_at")  # fmt: skip
    assert client.get("/api/plans", params={"limit": 1, "offset": 1}).json() == [
        {field: first[field] for field in summary}
    ]
    assert [(p["id"], p["model_name"], p["strategy"], p["mode"]) for p in client.get("/api/plans").json()] == [
        (second["id"], "gpt2", "tensor", "framework"),
        (first["id"], "fashion-mnist-mlp", "data", "tutorial"),
    ]
    # The request, the inputs and the document (tens of kilobytes of JSON a plan) are never read for a list.
    ((statement, _),) = sent_queries(database, lambda session: plan_store.list_plans(session, 100, 0))
    assert statement.split("FROM")[0].replace('"', "") == f"SELECT {', '.join(f'plan.{f}' for f in summary)} \n"


def test_create_list_get_and_export_a_plan(client: TestClient, database: Database) -> None:
    response = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "pipeline", "name": "seed"})
    assert response.status_code == 201
    created = response.json()
    assert created["name"] == "seed"
    assert created["workload"]["kccb"]["data_sizes"] == [2600, 33024, 131584, 803840]
    assert created["workload"]["trials"] == created["trials"] == 8
    plan_id = created["id"]

    listed = client.get("/api/plans").json()
    assert [(p["id"], p["strategy"], p["mode"]) for p in listed] == [(plan_id, "pipeline", "tutorial")]
    fetched = client.get(f"/api/plans/{plan_id}").json()
    assert fetched["workload"] == created["workload"]
    assert fetched["inputs"]["gpus"] == 4

    yaml_export = client.get(f"/api/plans/{plan_id}/kccb", params={"format": "yaml"})
    assert yaml_export.headers["content-type"].startswith("application/yaml")
    assert "collective_algorithm: ALGO_ALL_REDUCE_UNIDIRECTIONAL_RING" in yaml_export.text
    text_export = client.get(f"/api/plans/{plan_id}/kccb", params={"format": "text"})
    assert text_export.text.splitlines()[1:] == ["2600", "33024", "131584", "803840"]
    assert client.get(f"/api/plans/{plan_id}/kccb", params={"format": "json"}).json()[0]["iterations"] == 8
    assert client.get(f"/api/plans/{plan_id}/kccb", params={"format": "xml"}).status_code == 422
    assert plan_count(database) == 1


def test_preview_returns_the_document_and_stores_nothing(client: TestClient, database: Database) -> None:
    for mode, sizes in (("tutorial", [6438912]), ("framework", [4194304, 327680])):
        response = client.post(
            "/api/plans/preview", json={"model": "fashion-mnist-mlp", "strategy": "tensor", "mode": mode}
        )
        assert response.status_code == 200
        assert response.json()["kccb"]["data_sizes"] == sizes
    assert plan_count(database) == 0


def test_megatron_options_reach_the_plan(client: TestClient, database: Database) -> None:
    """--grad-reduce-in-bf16 and --megatron-core through the API: Llama-3-8B at TP 4 with sequence parallel
    all-reduces its 266,240 layer-norm gradients from fp32 main_grad unless told bf16; Mixtral at EP 8 sends
    its routing probabilities (16,384 B) from Megatron-core 0.12 on only."""
    llama = {"model": "llama-3-8b", "mode": "framework", "strategy": "tensor", "gpus": 4, "seq_len": 4096,
             "batch_size": 4, "sequence_parallel": True}  # fmt: skip
    for options, norms in (({}, (1_064_960, "float32")), ({"grad_reduce_in_bf16": True}, (532_480, "bfloat16"))):
        response = client.post("/api/plans/preview", json={**llama, **options})
        assert response.status_code == 200, response.text
        layer_norms = [c for c in response.json()["collectives"] if "layer-norm" in c["label"]]
        assert [(c["bytes_total"], c["dtype"]) for c in layer_norms] == [norms]
    mixtral = {"model": "mixtral-8x7b", "mode": "framework", "ep": 8}
    for version, sizes in (("0.16", [67_108_864, 16_384]), ("0.11", [67_108_864])):
        response = client.post("/api/plans/preview", json={**mixtral, "megatron_core": version})
        assert response.json()["kccb"][0]["data_sizes"] == sizes
    unknown = client.post("/api/plans/preview", json={**mixtral, "megatron_core": "0.9"})
    assert (unknown.status_code, unknown.json()["detail"][0]["loc"]) == (422, ["body", "megatron_core"])
    assert plan_count(database) == 0


@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        ({"model": "fashion-mnist-mlp", "batch_size": 0}, 422, "batch_size: must be at least 1, got 0"),
        ({"model": "llama-3-8b", "strategy": "hybrid", "gpus": 12, "tp": 8}, 422, "gpus: 12 GPUs are not divisible"),
        ({"model": "llama-9000"}, 422, "model: unknown model 'llama-9000'"),
        ({"model": "/etc/hostname.json"}, 422, "model: unknown model '/etc/hostname.json'"),
        ({"model": "model:999"}, 422, "model: no uploaded model definition 'model:999'"),
        ({"model": "mixtral-8x7b", "ep": 3}, 422, "ep: expert-parallel groups are carved from the data-parallel"),
        ({"model": "gpt2", "ep": 2}, 422, "ep: gpt2 has no experts the planner knows of"),
        ({"model": "mixtral-8x7b", "ep": 8, "hot_expert_factor": 9}, 422, "hot_expert_factor: must be between 1"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(client, database, body, status, detail) -> None:
    for path in ("/api/plans", "/api/plans/preview"):
        response = client.post(path, json=body)
        assert response.status_code == status
        assert response.json()["detail"].startswith(detail)
    assert plan_count(database) == 0


def test_malformed_json_and_wrong_types_are_rejected(client: TestClient, database: Database) -> None:
    response = client.post("/api/plans", content=b'{"model": ', headers={"content-type": "application/json"})
    assert response.status_code == 422
    response = client.post("/api/plans", json={"model": "gpt2", "strategy": "diagonal"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "strategy"]
    response = client.post("/api/plans", json={"model": "gpt2", "batchsize": 8})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "batchsize"]
    assert plan_count(database) == 0


def test_unknown_plan_is_404(client: TestClient) -> None:
    assert client.get("/api/plans/41").status_code == 404
    assert client.get("/api/plans/41/kccb").status_code == 404


def test_presets_carry_exact_parameter_counts(client: TestClient) -> None:
    presets = {p["name"]: p for p in client.get("/api/presets").json()}
    assert presets["llama-2-7b"]["parameter_count"] == 6_738_415_616
    assert presets["fashion-mnist-mlp"]["defaults"]["batch_size"] == 8192


def test_an_uploaded_model_definition_is_planned_by_id(client: TestClient, database: Database) -> None:
    inventory = inventory_from_hf_config(LLAMA_2_7B_CONFIG, name="Llama-2-7b-hf")
    with database.writing() as session:
        definition = ModelDefinition(
            name="Llama-2-7b-hf", source_kind="hf_config", content_sha256="0" * 64,
            inventory=inventory.model_dump(mode="json"), parameter_count=inventory.parameter_count,
        )  # fmt: skip
        session.add(definition)
        session.flush()
        definition_id = definition.id
    response = client.post("/api/plans", json={"model": f"model:{definition_id}", "strategy": "data", "gpus": 8})
    assert response.status_code == 201
    assert response.json()["model_definition_id"] == definition_id
    assert response.json()["workload"]["model"]["parameter_count"] == 6_738_415_616


def test_a_plan_saved_without_a_name_is_named_by_its_parallel_degrees_and_its_notes_by_its_rank_layout(
    client: TestClient,
) -> None:
    body = {"model": "mixtral-8x7b", "strategy": "hybrid", "mode": "framework", "gpus": 32, "tp": 2, "ep": 8}
    created = client.post("/api/plans", json=body).json()
    assert created["name"] == "mixtral-8x7b hybrid (framework), TP 2, EP 8"
    layout = [note for note in created["workload"]["notes"] if note.startswith("Framework mode")]
    assert layout == [
        "Framework mode: rank = dp_index × 2 + tp_index (TP innermost, then DP); each KCCB trial covers the group "
        "holding rank 0."
    ]
    seed = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "mode": "framework", "gpus": 4}).json()
    assert seed["name"] == "fashion-mnist-mlp data (framework)"
    assert (
        "Framework mode: rank = dp_index (DP over all 4 ranks); each KCCB trial covers the group holding rank 0."
        in (seed["workload"]["notes"])
    )
