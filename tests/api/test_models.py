"""The model-definitions API: every accepted kind of file, every kind of bad upload, hostile PyTorch
source stopped by the sandbox with the server still answering afterwards, and nothing stored on failure."""

import json

import pytest
from fastapi.testclient import TestClient
from sqlmodel import func, select

from emuplan.main import create_app
from emuplan.sandbox.worker import REFUSED_BY_THE_SANDBOX
from emuplan.settings import Settings
from emuplan.store.db import Database
from emuplan.store.tables import ModelDefinition
from emuplan.workload.pytorch_source import _captured_once
from paths import LLAMA_2_7B_CONFIG, MIXTRAL_8X7B_CONFIG, MODELS
from sql_capture import sent_queries

SEED_FORM = {"model_class": "Classifier", "input_shape": "1,28,28"}
SEED_PARAMETERS = [
    ["fc1.weight", [256, 784]], ["fc1.bias", [256]], ["fc2.weight", [128, 256]], ["fc2.bias", [128]],
    ["fc3.weight", [64, 128]], ["fc3.bias", [64]], ["fc4.weight", [10, 64]], ["fc4.bias", [10]],
]  # fmt: skip


def definition_count(database: Database) -> int:
    with database.read_session() as session:
        return session.exec(select(func.count()).select_from(ModelDefinition)).one()


def upload(client: TestClient, file_name: str, content: bytes, **form):
    return client.post("/api/models", files={"file": (file_name, content)}, data=form)


def parameters_of(body: dict) -> list:
    return [[p["name"], p["shape"]] for p in body["inventory"]["parameters"]]


@pytest.mark.both_databases
@pytest.mark.sandbox
def test_pytorch_source_is_read_in_the_sandbox_and_stored(client: TestClient, database: Database):
    source = (MODELS / "seed_classifier.py").read_bytes()
    response = upload(client, "model.py", source, name="seed", **SEED_FORM, model_kwargs="{}")
    assert response.status_code == 201, response.text
    created = response.json()
    assert (created["name"], created["source_kind"], created["parameter_count"]) == ("seed", "pytorch", 242762)
    assert parameters_of(created) == SEED_PARAMETERS
    assert [a["shape"] for a in created["inventory"]["activations"]] == [[256], [128], [64], [10]]
    assert created["options"] == {
        "model_class": "Classifier", "model_kwargs": {}, "input_shape": [1, 28, 28],
        "input_dtype": "float32", "label_dtype": "int64",
    }  # fmt: skip

    assert [m["id"] for m in client.get("/api/models").json()] == [created["id"]]
    assert client.get(f"/api/models/{created['id']}").json() == created
    with database.read_session() as session:
        row = session.get(ModelDefinition, created["id"])
        assert row.content == source
        assert row.inventory["parameters"][0] == {
            "name": "fc1.weight",
            "shape": [256, 784],
            "dtype": "float32",
            "requires_grad": True,
        }


@pytest.mark.both_databases
def test_onnx_safetensors_and_config_json_give_their_inventories(client: TestClient):
    onnx = upload(client, "classifier.onnx", (MODELS / "seed_classifier.onnx").read_bytes())
    assert onnx.status_code == 201, onnx.text
    assert (onnx.json()["source_kind"], onnx.json()["parameter_count"]) == ("onnx", 242762)
    assert parameters_of(onnx.json()) == SEED_PARAMETERS

    header = (MODELS / "seed_classifier.header.safetensors").read_bytes()
    for content in (header, header + bytes(971048)):  # the header alone, and the whole file
        tensors = upload(client, "model.safetensors", content)
        assert tensors.status_code == 201, tensors.text
        assert (tensors.json()["source_kind"], tensors.json()["parameter_count"]) == ("safetensors", 242762)
        assert parameters_of(tensors.json()) == SEED_PARAMETERS

    config = upload(client, "config.json", LLAMA_2_7B_CONFIG.read_bytes(), name="Llama-2-7b-hf")
    assert config.status_code == 201, config.text
    assert (config.json()["source_kind"], config.json()["parameter_count"]) == ("hf_config", 6738415616)

    assert [m["source_kind"] for m in client.get("/api/models").json()] == [
        "hf_config",
        "safetensors",
        "safetensors",
        "onnx",
    ]
    summary = ("id", "name", "source_kind", "file_name", "content_sha256", "parameter_count", "options", "created_at")
    assert client.get("/api/models", params={"offset": 3}).json() == [{field: onnx.json()[field] for field in summary}]
    assert (
        f'<option value="model:{config.json()["id"]}">Llama-2-7b-hf (hf_config, #{config.json()["id"]})</option>'
        in client.get("/plan").text
    )


@pytest.mark.both_databases
def test_model_lists_read_neither_the_uploaded_bytes_nor_the_inventory(client: TestClient, database: Database):
    assert upload(client, "classifier.onnx", (MODELS / "seed_classifier.onnx").read_bytes()).status_code == 201
    app_database = client.app.state.database
    for path in ("/api/models", "/plan"):
        sent = sent_queries(app_database, lambda _session, path=path: client.get(path).raise_for_status())
        selects = [statement for statement, _ in sent if "\nFROM model_definition " in statement.replace('"', "")]
        assert [statement.split("FROM")[0].replace('"', "") for statement in selects] == [
            "SELECT model_definition.id, model_definition.name, model_definition.source_kind, "
            "model_definition.file_name, model_definition.content_sha256, model_definition.parameter_count, "
            "model_definition.options, model_definition.created_at \n"
        ], path


@pytest.mark.both_databases
def test_only_the_header_of_a_safetensors_checkpoint_is_stored(client: TestClient, database: Database):
    header = (MODELS / "seed_classifier.header.safetensors").read_bytes()
    created = upload(client, "model.safetensors", header + bytes(971048)).json()
    with database.read_session() as session:
        assert session.get(ModelDefinition, created["id"]).content == header


@pytest.mark.both_databases
@pytest.mark.parametrize(
    ("file_name", "content", "status", "detail"),
    [
        ("model.safetensors", b"\x10\x00", 400, "model.safetensors: truncated: 2 bytes, but a safetensors file starts"),
        ("model.safetensors", b"", 400, "model.safetensors: the file is empty"),
        ("model.onnx", b"not an onnx model", 400, "model.onnx: not a valid ONNX model"),
        ("model.onnx", b"", 400, "model.onnx: the file is empty"),
        ("config.json", b"{", 400, "config.json: not valid JSON"),
        ("config.json", b"{}", 400, "config.json: missing field 'model_type'"),
        ("model.pt", b"\x80\x04K\x01.", 415, "model.pt: PyTorch pickle checkpoints (.pt, .pth, .bin, .pkl, .pickle, "
                                             ".ckpt) are never opened, because unpickling runs arbitrary code. Upload "
                                             "the weights as .safetensors"),
        ("pytorch_model.bin", b"\x80\x04", 415, "pytorch_model.bin: PyTorch pickle checkpoints"),
        ("weights.h5", b"HDF", 415, "weights.h5: unsupported model file; expected config.json, .safetensors, "
                                    ".onnx or .py (PyTorch source)"),
    ],
)  # fmt: skip
def test_bad_files_are_refused_and_nothing_is_stored(client, database, file_name, content, status, detail):
    response = upload(client, file_name, content)
    assert response.status_code == status
    assert response.json()["detail"].startswith(detail)
    assert definition_count(database) == 0


@pytest.mark.parametrize(
    ("form", "detail"),
    [
        ({"input_shape": "1,28,28"}, "a PyTorch source upload needs the form field(s) model_class"),
        ({"model_class": "Classifier"}, "a PyTorch source upload needs the form field(s) input_shape"),
        ({**SEED_FORM, "model_kwargs": "{oops"}, "model_kwargs: not valid JSON"),
        ({**SEED_FORM, "model_kwargs": "[1]"}, "model_kwargs: expected a JSON object of constructor arguments"),
        ({**SEED_FORM, "input_shape": "1x28"}, "input shape '1x28' is not a comma-separated list of integers"),
        ({**SEED_FORM, "input_dtype": "float13"}, "input_dtype 'float13' is not one of float64"),
        ({**SEED_FORM, "model_class": "os.system"}, "model class 'os.system' is not a Python class name"),
    ],
)
def test_unusable_form_fields_are_refused_before_the_sandbox_starts(client, database, form, detail):
    response = upload(client, "model.py", (MODELS / "seed_classifier.py").read_bytes(), **form)
    assert response.status_code == 422
    assert response.json()["detail"].startswith(detail)
    assert definition_count(database) == 0


@pytest.mark.sandbox
@pytest.mark.parametrize(
    ("fixture", "form", "detail"),
    [
        ("syntax_error.txt", {"model_class": "Broken", "input_shape": "4"}, "model.py, line 4: expected ':'"),
        ("seed_classifier.py", {"model_class": "Missing", "input_shape": "4"},
         "model.py defines no class 'Missing' (nn.Module classes: Classifier)"),
        ("bad_inputs.py", {"model_class": "NotAModule", "input_shape": "4"},
         "'NotAModule' in model.py is not a torch.nn.Module subclass"),
        ("bad_inputs.py", {"model_class": "NeedsWidth", "input_shape": "4", "model_kwargs": '{"width": 0}'},
         "NeedsWidth(**{'width': 0}) failed (model.py, line 14): ValueError: width must be positive, got 0"),
        ("seed_classifier.py", {"model_class": "Classifier", "input_shape": "3,32,32"},
         "forward() failed for an input of shape [2, 3, 32, 32] (batch of 2) (model.py, line 18): RuntimeError: "
         "a and b must have same reduction dim, but got [2, 3072] X [784, 256]."),
    ],
)  # fmt: skip
def test_broken_model_sources_are_explained(client, database, fixture, form, detail):
    response = upload(client, "model.py", (MODELS / fixture).read_bytes(), **form)
    assert response.status_code == 400
    assert response.json()["detail"] == detail
    assert definition_count(database) == 0


REFUSED = f"PermissionError: [Errno 1] Operation not permitted ({REFUSED_BY_THE_SANDBOX})"


@pytest.fixture
def strict_client(settings: Settings):
    """Tight limits so hostile uploads stop quickly; 20 s leaves room to import torch on a busy machine."""
    limited = settings.model_copy(update={"sandbox_timeout_s": 20.0, "sandbox_memory_mb": 3072})
    with TestClient(create_app(limited)) as test_client:
        yield test_client


@pytest.mark.sandbox
@pytest.mark.parametrize(
    ("fixture", "detail"),
    [
        ("hostile_infinite_loop.py", "the model did not finish within the time limit of 20 s"),
        ("hostile_allocate_50gb.py",
         "model.py, line 5: running the module failed: MemoryError: the model asked for more memory than the "
         "sandbox allows"),
        ("hostile_fork_bomb.py", f"model.py, line 8: running the module failed: {REFUSED}"),
        ("hostile_socket.py", f"model.py, line 7: running the module failed: {REFUSED}"),
        ("hostile_read_shadow.py",
         "model.py, line 7: running the module failed: FileNotFoundError: [Errno 2] No such file or directory: "
         "'/etc/shadow'"),
        ("hostile_write_outside.py",
         "model.py, line 6: running the module failed: OSError: [Errno 30] Read-only file system: "
         "'/sandbox/worker.py.escaped'"),
    ],
)  # fmt: skip
def test_hostile_models_are_stopped_and_the_server_stays_healthy(strict_client, database, fixture, detail):
    response = upload(strict_client, "model.py", (MODELS / fixture).read_bytes(), model_class="Model", input_shape="4")
    assert response.status_code == 400
    assert response.json()["detail"] == detail
    assert definition_count(database) == 0
    assert strict_client.get("/api/health").status_code == 200
    after = upload(strict_client, "model.onnx", (MODELS / "seed_classifier.onnx").read_bytes())
    assert after.status_code == 201


def test_uploads_over_the_size_limit_are_refused_while_streaming(settings: Settings, database: Database):
    small = settings.model_copy(update={"max_upload_bytes": 4096})
    with TestClient(create_app(small)) as client:
        response = upload(client, "model.safetensors", bytes(10_000))
        assert response.status_code == 413
        assert response.json()["detail"] == "Upload is larger than the limit of 4096 bytes (EMUPLAN_MAX_UPLOAD_BYTES)."
    assert definition_count(database) == 0


def test_without_bubblewrap_python_uploads_are_refused(client, database, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    response = upload(client, "model.py", (MODELS / "seed_classifier.py").read_bytes(), **SEED_FORM)
    assert response.status_code == 503
    assert "need bubblewrap (Debian package 'bubblewrap'), which is not installed" in response.json()["detail"]
    assert definition_count(database) == 0


@pytest.mark.both_databases
def test_an_unknown_definition_is_404(client: TestClient):
    response = client.get("/api/models/99")
    assert (response.status_code, response.json()) == (404, {"detail": "no model definition with id 99"})


def test_model_kwargs_must_be_json_text_not_a_file(client: TestClient):
    response = upload(client, "model.py", b"x", **SEED_FORM, model_kwargs=json.dumps({"width": 3}))
    assert response.status_code == 400  # reaches the sandbox: b"x" names no class
    assert response.json()["detail"].startswith("model.py, line 1: running the module failed: NameError")


@pytest.mark.sandbox
def test_plans_of_an_uploaded_pytorch_model_carry_the_captured_collectives(client: TestClient, database: Database):
    source = (MODELS / "seed_classifier.py").read_bytes()
    definition_id = upload(client, "model.py", source, **SEED_FORM).json()["id"]
    request = {"model_definition_id": definition_id, "strategy": "data", "dp_impl": "fsdp2", "mode": "framework"}
    response = client.post("/api/plans", json=request)
    assert response.status_code == 201, response.text
    plan = response.json()
    assert plan["model_definition_id"] == definition_id
    workload = plan["workload"]
    captured = [(c["op"], c["phase"], c["bytes_total"]) for c in workload["captured"]]
    assert [size for op, phase, size in captured if op == "all_gather" and phase == "forward"] == [
        803840,
        131584,
        33024,
        3120,
    ]
    assert [size for op, _, size in captured if op == "reduce_scatter"] == [3120, 33024, 131584, 803840]
    assert captured == [(c["op"], c["phase"], c["bytes_total"]) for c in workload["collectives"]]
    assert workload["capture_differences"] == []
    assert client.get(f"/api/plans/{plan['id']}").json()["workload"]["captured"] == workload["captured"]

    preview = client.post("/api/plans/preview", json={"model": f"model:{definition_id}", "strategy": "data"})
    assert preview.status_code == 200, preview.text
    assert [c["bytes_total"] for c in preview.json()["captured"]] == [971048]
    # The live preview repeats itself: a second identical capture comes from the cache, not the sandbox.
    hits = _captured_once.cache_info().hits
    faster_link = {"model": f"model:{definition_id}", "strategy": "data", "link_gbps": 400}
    faster = client.post("/api/plans/preview", json=faster_link).json()["captured"]
    assert [(c["bytes_total"], round(c["ideal_time_us"], 3)) for c in faster] == [(971048, 59.131)]
    assert _captured_once.cache_info().hits == hits + 1


@pytest.mark.both_databases
def test_a_plan_names_its_model_once(client: TestClient):
    header = (MODELS / "seed_classifier.header.safetensors").read_bytes()
    definition_id = upload(client, "model.safetensors", header).json()["id"]
    conflicting = client.post("/api/plans", json={"model": "gpt2", "model_definition_id": definition_id})
    assert conflicting.status_code == 422
    assert conflicting.json()["detail"] == f"model: 'gpt2' contradicts model_definition_id 'model:{definition_id}'"
    missing = client.post("/api/plans", json={"strategy": "data"})
    assert (missing.status_code, missing.json()["detail"]) == (
        422,
        "model: give a preset name or a model_definition_id",
    )
    planned = client.post("/api/plans", json={"model_definition_id": definition_id, "mode": "tutorial"})
    assert planned.status_code == 201, planned.text
    assert planned.json()["workload"]["kccb"]["data_sizes"] == [971048]
    assert planned.json()["workload"]["captured"] == []


def test_an_uploaded_mixtral_config_plans_with_expert_parallelism(client: TestClient):
    """The published Mixtral-8x7B config.json through the API: counted exactly, planned with ep 8; relabelled
    'mistral' it is refused as a mixture of experts and nothing is stored."""
    content = MIXTRAL_8X7B_CONFIG.read_bytes()
    stored = upload(client, "config.json", content)
    assert stored.status_code == 201, stored.text
    assert (stored.json()["name"], stored.json()["parameter_count"]) == ("MixtralForCausalLM", 46_702_792_704)
    plan = client.post("/api/plans/preview", json={"model": f"model:{stored.json()['id']}", "ep": 8})
    assert plan.status_code == 200, plan.text
    assert plan.json()["kccb"][0]["data_sizes"] == [67_108_864, 16_384]  # the tokens, their routing probabilities
    relabelled = upload(client, "config.json", content.replace(b'"mixtral"', b'"mistral"'))
    assert relabelled.status_code == 400
    assert "describe a mixture of experts, which 'mistral' models do not have" in relabelled.json()["detail"]
    assert len(client.get("/api/models").json()) == 1


@pytest.mark.both_databases
@pytest.mark.sandbox
def test_ddp_of_an_uploaded_model_with_an_unused_parameter_needs_find_unused_parameters(
    client: TestClient, database: Database
):
    """Without the option the plan is refused with DDP's own reason and nothing is stored; with it, DDP's
    construction-order buckets (as real DDP on gloo sends them, tests/unit/test_sandbox_capture.py) and the
    used-parameter map. The plan page offers the option."""
    source = (MODELS / "unused_branch.py").read_bytes()
    definition_id = upload(client, "model.py", source, model_class="UnusedBranch", input_shape="512").json()["id"]
    request = {"model_definition_id": definition_id, "strategy": "data", "mode": "framework", "gpus": 2}
    refused = client.post("/api/plans", json=request)
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith(
        "find_unused_parameters: unused.weight, unused.bias got no gradient in the model's backward, and DDP "
        "without find_unused_parameters=True fails at the second step"
    )
    assert client.get("/api/plans").json() == []
    planned = client.post("/api/plans", json={**request, "find_unused_parameters": True})
    assert planned.status_code == 201, planned.text
    collectives = planned.json()["workload"]["collectives"]
    assert [(c["op"], c["dtype"], c["bytes_total"]) for c in collectives] == [
        ("all_reduce", "float32", 1_598_504), ("all_reduce", "float32", 1_048_576), ("all_reduce", "int32", 24)
    ]  # fmt: skip
    assert 'name="find_unused_parameters"' in client.get("/plan").text
