"""Platform profiles through their service, ``/api/platforms`` and the ``/platforms`` page: built-ins listed and
read-only, profiles users add, edit (rename) and delete, and what runs and plans that name them see."""

import re
from html import unescape

import httpx2
import pytest
from fastapi.testclient import TestClient
from sqlmodel import col, select

from emuplan.roles import Role
from emuplan.services import imports as run_imports
from emuplan.services import platforms as service
from emuplan.settings import Settings
from emuplan.store import accounts
from emuplan.store.db import Database
from emuplan.store.tables import Plan, Run
from emuplan.workload.platforms import BUILTIN_PLATFORMS
from live_server import start_server, stop_server
from paths import RESULTS

pytestmark = pytest.mark.both_databases

BUILTIN_NAMES = list(BUILTIN_PLATFORMS)
GIB = 1024**3
# A RoCE H100 cluster at half the NDR rate: what a user adds.
ROCE = {
    "name": "h100-roce-200g", "title": "H100 SXM + RoCE 200G", "gpu_model": "NVIDIA H100 SXM5", "gpus_per_node": 8,
    "scale_up_domain_gpus": 8, "scale_up_fabric": "NVLink 4", "scale_up_gb_s": 450, "scale_out_fabric": "RoCE 200G",
    "nics_per_node": 8, "nic_gbit_s": 200, "gpu_generation": "hopper", "scale_up_link": "nvlink", "nvls": True,
    "degraded_below_pct": 85, "fail_below_pct": 60, "sources": ["our fabric's acceptance test, 2026-11"],
}  # fmt: skip
ROCE_PUBLIC = {**ROCE, "scale_out_gb_s": 25.0, "builtin": False, "runs": 0, "plans": 0}


def name_runs_and_plans(database: Database, platform: str, files: list[str], plans: int) -> None:
    """Imports the result ``files`` and stores ``plans`` plans, each naming ``platform`` (as the integrator's
    forms will: the run and plan columns are the store's)."""
    with database.writing() as session:
        for file_name in files:
            run = run_imports.import_result_file(session, RESULTS / file_name, file_name, max_decompressed_bytes=GIB)
            run.platform = platform
        for number in range(plans):
            session.add(Plan(name=f"plan {number}", model_name="m", strategy="data", mode="training", trials=1,
                             platform=platform))  # fmt: skip


def named(database: Database, table: type[Run] | type[Plan]) -> list[str | None]:
    with database.read_session() as session:
        return list(session.exec(select(table.platform).order_by(col(table.id))).all())


def test_the_builtins_are_listed_first_with_their_figures_then_the_added_ones(client: TestClient) -> None:
    listed = client.get("/api/platforms").json()
    assert [(p["name"], p["builtin"]) for p in listed] == [(name, True) for name in BUILTIN_NAMES]
    assert listed[1] == {
        **BUILTIN_PLATFORMS["h100-ndr"].model_dump(mode="json"), "builtin": True, "runs": 0, "plans": 0,
    }  # fmt: skip
    assert listed[1]["scale_out_gb_s"] == 50.0
    assert client.post("/api/platforms", json=ROCE).json() == ROCE_PUBLIC
    assert client.post("/api/platforms", json={**ROCE, "name": "a-first"}).status_code == 201
    assert [p["name"] for p in client.get("/api/platforms").json()] == [*BUILTIN_NAMES, "a-first", "h100-roce-200g"]
    assert client.get("/api/platforms/h100-roce-200g").json() == ROCE_PUBLIC
    assert client.get("/api/platforms/gb200-nvl72").json()["scale_up_domain_gpus"] == 72


def test_a_name_is_unique_across_builtins_and_added_profiles(client: TestClient) -> None:
    assert client.post("/api/platforms", json=ROCE).status_code == 201
    again = client.post("/api/platforms", json=ROCE)
    assert (again.status_code, again.json()) == (
        409,
        {"detail": "name: a platform named 'h100-roce-200g' exists already"},
    )
    builtin = client.post("/api/platforms", json={**ROCE, "name": "h100-ndr"})
    assert (builtin.status_code, builtin.json()) == (
        409, {"detail": "name: 'h100-ndr' is a built-in platform; choose another name"},
    )  # fmt: skip
    renamed_onto = client.put("/api/platforms/h100-roce-200g", json={**ROCE, "name": "gb200-nvl72"})
    assert renamed_onto.status_code == 409
    assert [p["name"] for p in client.get("/api/platforms").json()] == [*BUILTIN_NAMES, "h100-roce-200g"]


def test_a_builtin_can_be_neither_edited_nor_deleted(client: TestClient) -> None:
    edited = client.put("/api/platforms/h100-ndr", json={**ROCE, "name": "h100-ndr"})
    deleted = client.delete("/api/platforms/h100-ndr")
    advice = "add one of your own under another name (its figures copied and changed) instead"
    assert (edited.status_code, edited.json()) == (
        409, {"detail": f"h100-ndr: a built-in platform cannot be edited; {advice}"},
    )  # fmt: skip
    assert (deleted.status_code, deleted.json()) == (
        409, {"detail": f"h100-ndr: a built-in platform cannot be deleted; {advice}"},
    )  # fmt: skip
    assert client.get("/api/platforms/h100-ndr").json()["nic_gbit_s"] == 400


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"name": "H100 RoCE"}, ["body", "name"], "Value error, 'H100 RoCE' must be 1 to 64 lowercase letters, digits "
         "and hyphens, starting with a letter or digit"),
        ({"nic_gbit_s": -400}, ["body", "nic_gbit_s"], "Input should be greater than 0"),
        ({"scale_up_domain_gpus": 12}, ["body"], "Value error, scale_up_domain_gpus: a scale-up domain is whole nodes; "
         "12 GPUs is not a multiple of 8 GPUs per node"),
        ({"fail_below_pct": 90}, ["body"], "Value error, fail_below_pct: 90 % must be below degraded_below_pct (85 %)"),
        ({"link_gbps": 400}, ["body", "link_gbps"], "Extra inputs are not permitted"),
    ],
)  # fmt: skip
def test_bad_figures_are_422_naming_the_field_and_store_nothing(
    client: TestClient, change: dict, field: list, message: str
) -> None:
    refused = client.post("/api/platforms", json={**ROCE, **change})
    assert refused.status_code == 422
    assert [(error["loc"], error["msg"]) for error in refused.json()["detail"]] == [(field, message)]
    assert client.put("/api/platforms/h100-ndr", json={**ROCE, **change}).status_code == 422
    assert len(client.get("/api/platforms").json()) == len(BUILTIN_NAMES)


def test_an_unknown_name_is_404(client: TestClient) -> None:
    for response in (
        client.get("/api/platforms/nvl576"),
        client.put("/api/platforms/nvl576", json=ROCE),
        client.delete("/api/platforms/nvl576"),
    ):
        assert response.status_code == 404
    assert client.get("/api/platforms/nvl576").json() == {
        "detail": "no platform named 'nvl576': `emuplan platforms list` shows them"
    }


def test_renaming_carries_the_runs_and_plans_along_and_deleting_leaves_them_with_no_platform(
    client: TestClient, database: Database
) -> None:
    client.post("/api/platforms", json=ROCE)
    name_runs_and_plans(database, "h100-roce-200g", ["generated-per-iteration.csv", "generated-per-flow.csv"], plans=1)
    name_runs_and_plans(database, "h100-ndr", ["generated-fct.txt"], plans=0)
    assert client.get("/api/platforms/h100-roce-200g").json()["runs"] == 2
    listed = {p["name"]: (p["runs"], p["plans"]) for p in client.get("/api/platforms").json()}
    assert (listed["h100-ndr"], listed["h100-roce-200g"]) == ((1, 0), (2, 1))

    renamed = client.put("/api/platforms/h100-roce-200g", json={**ROCE, "name": "roce-200g", "nic_gbit_s": 100})
    assert renamed.json() == {
        **ROCE_PUBLIC, "name": "roce-200g", "nic_gbit_s": 100, "scale_out_gb_s": 12.5, "runs": 2, "plans": 1,
    }  # fmt: skip
    assert named(database, Run) == ["roce-200g", "roce-200g", "h100-ndr"]
    assert named(database, Plan) == ["roce-200g"]
    assert client.get("/api/platforms/h100-roce-200g").status_code == 404

    deleted = client.delete("/api/platforms/roce-200g")
    assert deleted.json() == {"name": "roce-200g", "runs_detached": 2, "plans_detached": 1}
    assert named(database, Run) == [None, None, "h100-ndr"]
    assert named(database, Plan) == [None]
    assert [p["name"] for p in client.get("/api/platforms").json()] == BUILTIN_NAMES


def test_the_store_keeps_every_figure_as_given(database: Database) -> None:
    with database.writing() as session:
        service.create_platform(session, ROCE)
    with database.read_session() as session:
        entry = service.get_platform(session, "h100-roce-200g")
    assert (entry.builtin, dict(entry.platform)) == (False, ROCE)


def test_a_viewer_reads_the_profiles_and_only_an_editor_changes_them(database: Database, database_url: str) -> None:
    with database.writing() as session:
        viewer, _ = accounts.create_account(session, "vi", Role.viewer)
        editor, _ = accounts.create_account(session, "ed", Role.editor)
        tokens = {
            account.name: accounts.create_api_token(session, account.id, "test", None)[1]
            for account in (viewer, editor)
        }
    server = start_server(Settings(database_url=database_url, demo=False, auth="accounts"))
    try:

        def as_(name: str) -> httpx2.Client:
            return httpx2.Client(base_url=server.url, headers={"Authorization": f"Bearer {tokens[name]}"})

        with as_("vi") as viewer_client, as_("ed") as editor_client:
            assert len(viewer_client.get("/api/platforms").json()) == len(BUILTIN_NAMES)
            refused = viewer_client.post("/api/platforms", json=ROCE)
            assert refused.status_code == 403
            assert refused.json()["detail"].startswith("This needs the editor role (")
            assert editor_client.post("/api/platforms", json=ROCE).status_code == 201
            assert viewer_client.delete("/api/platforms/h100-roce-200g").status_code == 403
            page = viewer_client.get("/platforms").text
            assert 'id="platform-h100-roce-200g"' in page and 'id="platform-form"' not in page
            assert "Copy as new" not in page
            assert 'id="platform-form"' in editor_client.get("/platforms").text
            assert editor_client.delete("/api/platforms/h100-roce-200g").status_code == 200
    finally:
        stop_server(server)


def page_text(html: str, selector_id: str) -> str:
    """The text of the element with this id (tags dropped, spaces folded)."""
    start = html.index(f'id="{selector_id}"')
    section = html[start : html.index("</section>", start)]
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", section.split(">", 1)[1])).split())


SAME_ORIGIN = {"Sec-Fetch-Site": "same-origin"}


def test_the_page_lists_every_figure_and_source_and_its_forms_add_edit_and_delete(
    client: TestClient, database: Database
) -> None:
    page = client.get("/platforms")
    assert page.status_code == 200
    assert page_text(page.text, "platform-h100-ndr") == (
        "H100 SXM + NDR 400G h100-ndr built-in · used by 0 runs and 0 plans "
        "GPU NVIDIA H100 SXM5, 8 per node "
        "Scale-up NVLink 4: 450 GB/s per GPU per direction, 8 GPUs per domain "
        "Scale-out InfiniBand NDR 400G: 8 × 400 Gbit/s per node = 50 GB/s per GPU per direction "
        "NCCL's model Hopper GPUs over NVLink, NVLink SHARP (NVLS): the expected curve is NCCL's own cost model on "
        "these figures "
        "Verdict degraded below 80 % of expected where bandwidth dominates, fails below 50 % "
        f"Sources (4) {' '.join(BUILTIN_PLATFORMS['h100-ndr'].sources)} Copy as new"
    )
    assert 'href="/platforms?edit=h100-ndr' not in page.text  # built-ins: no edit, no delete

    form = {name: str(value) for name, value in ROCE.items() if name != "sources"}
    added = client.post("/platforms", data={**form, "sources": "line one\n\n  line two  \n"}, headers=SAME_ORIGIN)
    assert added.status_code == 200
    assert '<p class="note" role="status">Platform h100-roce-200g added.</p>' in added.text
    assert client.get("/api/platforms/h100-roce-200g").json()["sources"] == ["line one", "line two"]

    editing = client.get("/platforms", params={"edit": "h100-roce-200g"}).text
    assert '<form method="post" action="/platforms/h100-roce-200g" class="inputs">' in editing
    assert 'name="nic_gbit_s" value="200"' in editing and '<option value="hopper" selected>' in editing
    copied = client.get("/platforms", params={"copy": "gb200-nvl72"}).text
    assert 'name="name" value=""' in copied and 'name="scale_up_domain_gpus" value="72"' in copied
    # A built-in is not offered for editing: its figures come as a new profile, with the reason.
    builtin_edit = client.get("/platforms", params={"edit": "h100-ndr"}).text
    assert "h100-ndr: a built-in platform cannot be edited" in unescape(builtin_edit)
    assert '<form method="post" action="/platforms" class="inputs">' in builtin_edit
    assert 'name="name" value=""' in builtin_edit and 'name="nic_gbit_s" value="400"' in builtin_edit

    refused = client.post("/platforms/h100-roce-200g", data={**form, "fail_below_pct": "95"}, headers=SAME_ORIGIN)
    assert refused.status_code == 422
    assert "fail_below_pct: 95 % must be below degraded_below_pct (85 %)" in unescape(refused.text)
    assert 'name="fail_below_pct" value="95"' in refused.text  # what was typed is kept
    saved = client.post("/platforms/h100-roce-200g", data={**form, "nic_gbit_s": "400"}, headers=SAME_ORIGIN)
    assert "Platform h100-roce-200g saved." in saved.text
    assert client.get("/api/platforms/h100-roce-200g").json()["scale_out_gb_s"] == 50

    name_runs_and_plans(database, "h100-roce-200g", ["generated-per-iteration.csv"], plans=0)
    listed = client.get("/platforms").text
    assert "Delete (1 run and 0 plans will have no platform)" in listed
    gone = client.post("/platforms/h100-roce-200g/delete", headers=SAME_ORIGIN)
    assert "Platform h100-roce-200g deleted; 1 run and 0 plans that named it now have no platform." in gone.text
    builtin = client.post("/platforms/h100-ndr/delete", headers=SAME_ORIGIN)
    assert builtin.status_code == 409
    assert "h100-ndr: a built-in platform cannot be deleted" in builtin.text
