"""What a user states of a run (``results.run_fields``) is written once: the upload form, PATCH's body, the run's
documents, ``emuplan import`` and ``emuplan runs edit`` and the pages take each field's description and limits
from it, and a field half-added (in the definition but not on a surface, or the other way) fails here by name.
Then what the derivation added: ``import --measured-at`` and ``runs edit --platform``, locally and over HTTP."""

import json

import pytest
import typer
from typer.testing import CliRunner

from emuplan.api.routes.runs import UploadForm
from emuplan.cli import app
from emuplan.results.run_fields import RUN_FIELDS
from emuplan.roles import Role
from emuplan.services.runs import RunUpdate
from emuplan.store import accounts
from live_server import LiveServer
from paths import SHARED_NCCL

A100 = SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"
# Each stated field's option in ``emuplan runs edit`` (every one) and ``emuplan import`` (those an upload takes).
EDIT_OPTIONS = {"name": "--name", "tags": "--tag", "note": "--note", "facts": "--fact", "platform": "--platform",
                "plan_id": "--plan", "measured_at": "--measured-at"}  # fmt: skip
IMPORT_OPTIONS = {"name": "--name", "tags": "--tag", "facts": "--fact", "platform": "--platform", "plan_id": "--plan",
                  "measured_at": "--measured-at"}  # fmt: skip
runner = CliRunner(env={"COLUMNS": "1000", "EMUPLAN_SERVER": None, "EMUPLAN_TOKEN": None})


def options_help(*command: str) -> dict[str, str]:
    """Each option of the CLI command (its longest flag) → its help."""
    found = typer.main.get_command(app)
    for name in command:
        found = found.commands[name]
    return {max(param.opts, key=len): param.help for param in found.params if param.param_type_name == "option"}


def test_a_runs_changes_are_the_fields_a_user_states_and_its_collectives():
    assert set(RunUpdate.model_fields) == {*RUN_FIELDS, "collectives"}
    assert set(UploadForm.model_fields) & set(RUN_FIELDS) == set(IMPORT_OPTIONS)


@pytest.mark.parametrize("field", list(RUN_FIELDS))
def test_each_surface_describes_a_field_as_its_definition_does(field: str):
    description = RUN_FIELDS[field].description
    assert RunUpdate.model_fields[field].description.startswith(description)
    assert options_help("runs", "edit")[EDIT_OPTIONS[field]].startswith(description)
    if field in IMPORT_OPTIONS:
        assert UploadForm.model_fields[field].description.startswith(description)
        assert options_help("import")[IMPORT_OPTIONS[field]].startswith(description)


def test_the_api_documents_and_bounds_each_field_from_its_definition(client):
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    update = {name: schema for name, schema in schemas["RunUpdate"]["properties"].items()}
    assert update["name"]["anyOf"][0]["maxLength"] == 200
    assert update["note"]["anyOf"][0]["maxLength"] == 4000
    assert update["platform"]["anyOf"][0]["maxLength"] == 64
    assert update["tags"]["anyOf"][0] == {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 64}}
    assert update["facts"]["anyOf"][0]["maxProperties"] == 40
    assert update["plan_id"]["title"] == "Plan"
    public = schemas["RunPublic"]["properties"]
    for field in ("note", "measured_at"):
        assert public[field]["description"] == RUN_FIELDS[field].description
    listed = schemas["RunListItem"]["properties"]
    for field in ("name", "tags", "facts", "platform", "plan_id"):
        assert listed[field]["description"] == RUN_FIELDS[field].description


def test_the_pages_forms_label_and_bound_the_fields_from_their_definition(client):
    page = client.get("/runs").text
    assert '<input type="text" name="name" id="upload-name" maxlength="200"' in page
    assert (
        '<label class="wide-field">Fabric facts <textarea name="facts" id="upload-facts" rows="2" placeholder="one a '
        'line: nic = ConnectX-7, nccl = 2.21.5, topology = rail-optimised" title="What it ran on, key = value '
        "(topology, NIC, switch, firmware, NCCL version…): at most 40, keys of 64 and values of 200 characters at "
        'most."></textarea></label>'
    ) in page
    assert '<label>Tags <input type="text" name="tags" id="upload-tags" placeholder="comma separated"' in page


@pytest.mark.both_databases
def test_import_says_when_a_log_was_measured_and_edit_names_and_clears_its_platform(cli_env):
    imported = runner.invoke(app, ["import", str(A100), "--measured-at", "2026-11-03T02:00+01:00", "--json"])
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.output)["measured_at"] == "2026-11-03T01:00:00+00:00"
    named = runner.invoke(app, ["runs", "edit", "1", "--platform", "a100-hdr", "--json"])
    assert json.loads(named.output)["platform"] == "a100-hdr"
    assert json.loads(runner.invoke(app, ["check", "1", "--json"]).output)[0]["status"] == "pass"  # judged by it
    cleared = runner.invoke(app, ["runs", "edit", "1", "--platform", "none", "--json"])
    assert json.loads(cleared.output)["platform"] is None
    assert json.loads(runner.invoke(app, ["check", "1", "--json"]).output)[0]["status"] == "not judged"
    unknown = runner.invoke(app, ["runs", "edit", "1", "--platform", "dgx-z"])
    assert (unknown.exit_code, unknown.output.strip()) == (
        2,
        "error: platform: no platform named 'dgx-z' (GET /api/platforms lists them)",
    )
    future = runner.invoke(app, ["import", str(SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"), "--measured-at",
                                 "2999-01-01T00:00Z"])  # fmt: skip
    assert (future.exit_code, future.output.strip()) == (
        2,
        "error: measured_at: 2999-01-01T00:00:00+00:00 is in the future",
    )


def test_the_same_options_over_http_change_the_same_fields(accounts_server: LiveServer, add_account, database):
    add_account("ed", Role.editor)
    with database.writing() as session:
        token = accounts.create_api_token(session, accounts.get_account(session, "ed").id, "test", None)[1]
    server = ["--server", accounts_server.url, "--token", token]
    imported = runner.invoke(app, [*server, "import", str(A100), "--measured-at", "2026-11-03T02:00Z", "--json"])
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.output)["measured_at"] == "2026-11-03T02:00:00+00:00"
    named = runner.invoke(app, [*server, "runs", "edit", "1", "--platform", "a100-hdr", "--json"])
    assert json.loads(named.output)["platform"] == "a100-hdr"
    cleared = runner.invoke(app, [*server, "runs", "edit", "1", "--platform", "none", "--json"])
    assert json.loads(cleared.output)["platform"] is None
