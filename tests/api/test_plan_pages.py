"""The plan pages as a client without JavaScript sees them: every planning option on the form, a
saved plan read-only with its settings, and "Edit as a new plan" filled with what was typed."""

import html
import json
import re

import pytest
from fastapi.testclient import TestClient
from typer.main import get_command

from emuplan.cli import app as cli_app
from emuplan.store.db import Database
from emuplan.store.tables import Plan
from emuplan.workload.document import PlanRequest
from emuplan.workload.plan_options import OptionGroup

pytestmark = pytest.mark.both_databases

FORM_CONTROL = re.compile(r'<(?:input|select)[^>]* name="(\w+)"')


def form_controls(page: str) -> list[str]:
    form = page[page.index('<form class="option-groups" id="plan-form"') : page.index("</form>")]
    return FORM_CONTROL.findall(form)


def initial_of(page: str) -> dict:
    return json.loads(html.unescape(re.search(r'data-initial="([^"]*)"', page).group(1)))


def test_the_form_has_a_control_for_every_request_field_in_its_group(client: TestClient) -> None:
    page = client.get("/plan").text
    assert sorted(form_controls(page)) == sorted(PlanRequest.model_fields)
    legends = re.findall(r"<legend>(\w+)</legend>", page)
    assert legends == ["Model", "Data", "Layout", "Parallelism", "Network", "Advanced"] == list(OptionGroup)
    network = page[page.index('id="group-network"') : page.index('id="group-advanced"')]
    assert form_controls('<form class="option-groups" id="plan-form"' + network + "</form>") == [
        "link_gbps",
        "latency_us",
    ]
    # Defaults are the planner's, shown as placeholders by the script: nothing is typed in.
    assert re.search(r'<input type="number"[^>]* value=', page) is None
    assert 'Link speed, Gbit/s per rank <input type="number" name="link_gbps"' in " ".join(page.split())


def test_a_saved_plan_keeps_its_request_as_given(client: TestClient) -> None:
    body = {"model": "fashion-mnist-mlp", "strategy": "pipeline", "link_gbps": 400, "gpus": 4, "name": "seed"}
    created = client.post("/api/plans", json=body).json()
    assert created["request"] == {"model": "fashion-mnist-mlp", "strategy": "pipeline", "gpus": 4, "link_gbps": 400.0}
    assert created["inputs"]["hosts"] == 4 and created["inputs"]["latency_us"] == 5.0
    assert client.get(f"/api/plans/{created['id']}").json()["request"] == created["request"]


def test_a_saved_plan_is_read_only_with_edit_as_a_new_plan(client: TestClient) -> None:
    plan_id = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "epochs": 2}).json()[
        "id"
    ]
    page = client.get(f"/plans/{plan_id}").text
    assert 'id="plan-form"' not in page and '<input type="number" name=' not in page
    assert f'<a class="button" id="edit-as-new" href="/plan?from={plan_id}">Edit as a new plan</a>' in page
    assert f'href="/api/plans/{plan_id}/kccb?format=yaml"' in page
    settings = {
        name: " ".join(value.split())
        for name, value in re.findall(r'<dd data-field="(\w+)">(.*?)</dd>', page, flags=re.DOTALL)
    }
    assert settings["epochs"] == "2"
    assert settings["strategy"] == "data parallel"
    assert settings["dataset_size"] == '60000 <span class="badge">default</span>'
    assert settings["link_gbps"] == '100.0 <span class="badge">default</span>'
    assert settings["seq_len"] == '— <span class="badge">default</span>'

    edit = client.get(f"/plan?from={plan_id}")
    assert edit.status_code == 200
    assert initial_of(edit.text) == {"model": "fashion-mnist-mlp", "strategy": "data", "epochs": 2}
    assert f'<a href="/plans/{plan_id}">#{plan_id} ' in edit.text
    assert "Save as a new plan" in edit.text
    assert client.get("/plan?from=999").status_code == 404


def test_a_saved_expert_parallel_plan_offers_chakra_traces_with_or_without_tensor_parallel_experts(
    client: TestClient,
) -> None:
    for body in ({"model": "mixtral-8x7b", "ep": 2, "dp": 2}, {"model": "mixtral-8x7b", "ep": 4, "tp": 2}):
        plan_id = client.post("/api/plans", json=body).json()["id"]
        page = client.get(f"/plans/{plan_id}").text
        assert re.search(rf'<dd data-field="ep">\s*{body["ep"]}\s*</dd>', page)
        assert 'id="download-chakra"' in page
        assert client.get(f"/api/plans/{plan_id}/workload", params={"format": "chakra"}).status_code == 200


def test_a_saved_plan_never_offers_a_chakra_download_the_export_refuses(client: TestClient) -> None:
    plan_id = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data"}).json()["id"]
    refusal = (
        "mode: a Chakra trace follows the framework's schedule; this plan uses the tutorial rules "
        "(plan it again with mode framework)"
    )
    page = client.get(f"/plans/{plan_id}").text
    # A tutorial plan's page offers no trace and needs no reason: only framework plans ever have one.
    assert 'id="download-chakra"' not in page and 'id="no-chakra"' not in page
    chakra = client.get(f"/api/plans/{plan_id}/workload", params={"format": "chakra"})
    assert (chakra.status_code, chakra.json()["detail"]) == (422, refusal)


def test_a_plan_stored_before_requests_were_kept_is_edited_from_its_inputs(
    client: TestClient, database: Database
) -> None:
    created = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "tensor"}).json()
    with database.writing() as session:
        plan = session.get(Plan, created["id"])
        plan.request = None
        session.add(plan)
    assert initial_of(client.get(f"/plan?from={created['id']}").text) == created["inputs"]
    page = client.get(f"/plans/{created['id']}").text
    assert "Every value as the planner used it." in page and 'class="badge">default' not in page


def test_every_planning_option_of_the_cli_has_a_control_on_the_page(client: TestClient) -> None:
    plan_command = get_command(cli_app).commands["plan"]
    # Output choices of the terminal (JSON, the KCCB export alone, saving, presets, --wide), not planning options.
    options = {param.name for param in plan_command.params} - {"json_output", "export", "save", "list_presets", "wide"}
    page = client.get("/plan").text
    upload_form = page[page.index('<form class="inputs" id="model-form"') :]
    upload_form = upload_form[: upload_form.index("</form>")]
    on_page = {
        *form_controls(page),
        *FORM_CONTROL.findall(upload_form.replace('type="file" id="model-file" name="file"', "")),
        "name",  # the plan's name, next to Save
        "platform",  # the platform it is planned for, next to Save
        "no_vocab_parallel_loss",  # the CLI's way to untick "Vocab-parallel loss"
    }
    assert 'id="plan-name"' in page and 'id="plan-platform"' in page and 'name="vocab_parallel_loss"' in page
    assert options <= on_page, options - on_page
