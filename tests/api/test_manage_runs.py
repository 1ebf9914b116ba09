"""The runs list's columns, filters and sorts, and managing runs, plans, comparisons and share links through the
API (rename, retag, annotate, fabric facts, link and unlink, delete keeping the database consistent)."""

import pytest
from sqlmodel import select

from emuplan.store import jobs
from emuplan.store.db import Database
from emuplan.store.tables import JobRecord, RunFact, RunTag, ShareLink
from paths import RESULTS, SHARED_NCCL

pytestmark = pytest.mark.both_databases

A100 = SHARED_NCCL / "a100-16rank-allreduce-2.17.txt"
V100_BROADCAST = SHARED_NCCL / "v100-12gpu-broadcast-pre2.13.txt"
ITERATIONS = RESULTS / "generated-per-iteration.csv"


def upload(client, path, **form) -> dict:
    response = client.post("/api/runs", files={"file": (path.name, path.read_bytes())}, data=form)
    assert response.status_code == 201, response.text
    return response.json()


def ids(client, **query) -> list[int]:
    response = client.get("/api/runs", params=query)
    assert response.status_code == 200, response.text
    return [run["id"] for run in response.json()]


@pytest.fixture
def three_runs(client) -> list[int]:
    """The A100 all-reduce log (16 ranks on 2 hosts, 10 GiB), the V100 broadcast sweep (12 ranks on 1 host,
    8 B – 8 GiB) and 2,000 generated all-reduce iterations (2,600 – 803,840 B): ids 1, 2, 3."""
    a100 = upload(client, A100, tags="nightly, fabric-a", facts="nic = ConnectX-6\nNCCL = 2.17.1")
    v100 = upload(client, V100_BROADCAST, tags="nightly", facts="nic = ConnectX-5", platform="a100-hdr")
    iterations = upload(client, ITERATIONS, strategy="pipeline")
    return [a100["id"], v100["id"], iterations["id"]]


def test_the_list_states_collectives_sizes_ranks_hosts_headline_verdict_platform_and_facts(client, three_runs):
    listed = {run["id"]: run for run in client.get("/api/runs").json()}
    shown = ("collectives", "size_min_bytes", "size_max_bytes", "ranks", "hosts", "p50_us", "peak_busbw_gbps",
             "verdict", "platform", "tags", "facts")  # fmt: skip
    assert {run_id: tuple(run[key] for key in shown) for run_id, run in listed.items()} == {
        1: (["all_reduce"], 10737418240, 10737418240, 16, 2, 90330.0, 222.88, "not judged", None,
            ["fabric-a", "nightly"], {"nic": "ConnectX-6", "NCCL": "2.17.1"}),
        2: (["broadcast"], 8, 8589934592, 12, 1, 74.46, 122.15, "degraded", "a100-hdr", ["nightly"],
            {"nic": "ConnectX-5"}),
        3: (["all_reduce"], 2600, 803840, None, None, 19922.8, None, "not judged", None, [], {}),
    }  # fmt: skip


def test_the_list_filters_by_each_column_in_any_case(client, three_runs):
    assert ids(client, collective="all_reduce") == [3, 1]
    assert ids(client, collective="reduce") == []  # a name, not a part of one
    assert ids(client, platform="a100-hdr") == [2]
    assert ids(client, verdict="degraded") == [2]
    assert ids(client, verdict="not judged") == [3, 1]
    assert ids(client, kind="size-sweep") == [2, 1]
    assert ids(client, ranks=16) == [1]
    assert ids(client, hosts=1) == [2]
    assert ids(client, size=1024) == [2]  # 8 B – 8 GiB spans it; 2,600 B – 785 KiB does not
    assert ids(client, size=10737418240) == [1]
    assert ids(client, fact="NIC=connectx-6") == [1]
    assert ids(client, fact="nccl") == [1]  # a key alone: the runs that state it
    assert ids(client, fact="nic") == [2, 1]
    assert ids(client, q="V100") == [2]
    assert ids(client, q="%") == []  # no wildcard
    assert ids(client, tag="nightly", collective="all_reduce", fact="nic=ConnectX-6") == [1]
    answer = client.get("/api/runs", params={"tag": "NIGHTLY"})
    assert answer.headers["x-total-count"] == "2"
    assert client.get("/api/runs", params={"verdict": "great"}).status_code == 422


def test_the_list_sorts_by_name_headline_ranks_and_size_with_runs_lacking_the_figure_last(client, three_runs):
    assert ids(client) == [3, 2, 1]
    assert ids(client, sort="oldest") == [1, 2, 3]
    assert ids(client, sort="name") == [1, 3, 2]  # a100…, generated…, v100…
    assert ids(client, sort="p50") == [2, 3, 1]  # 74.46, 19,922.8, 90,330 µs
    assert ids(client, sort="busbw") == [1, 2, 3]  # 222.88, 122.15 GB/s, none
    assert ids(client, sort="ranks") == [1, 2, 3]  # 16, 12, none
    assert ids(client, sort="size") == [1, 2, 3]  # 10 GiB, 8 GiB, 785 KiB
    assert ids(client, sort="p50", limit=1, offset=1) == [3]
    # Pages that reach past the runs with the figure go on with those without it.
    assert ids(client, sort="busbw", limit=2, offset=1) == [2, 3]
    assert ids(client, sort="busbw", limit=1, offset=2) == [3]
    assert ids(client, sort="busbw", limit=1, offset=3) == []
    assert ids(client, sort="p50", collective="all_reduce") == [3, 1]
    assert client.get("/api/runs", params={"sort": "colour"}).status_code == 422


def test_the_list_sorts_by_verdict_worst_first_by_platform_and_by_collective(client, three_runs):
    assert ids(client, sort="verdict") == [2, 3, 1]  # degraded, then the two not judged, newest first
    assert ids(client, sort="verdict", limit=2, offset=1) == [3, 1]
    assert ids(client, sort="verdict", limit=1, offset=2) == [1]
    assert ids(client, sort="verdict", tag="nightly") == [2, 1]
    assert ids(client, sort="platform") == [2, 1, 3]  # a100-hdr, then the runs without one, oldest first
    assert ids(client, sort="collective") == [1, 3, 2]  # all_reduce (oldest first), broadcast
    assert ids(client, sort="collective", limit=1, offset=2) == [2]


def test_a_run_is_renamed_retagged_annotated_and_its_facts_replaced(client, database: Database, three_runs):
    changed = client.patch(
        "/api/runs/1",
        json={"name": "  A100 rail 3 ", "tags": ["Rail-3", "nightly", "rail-3 "], "note": "after the firmware update",
              "facts": {"Switch": "QM9700", "firmware": "31.2010"}},
    )  # fmt: skip
    assert changed.status_code == 200, changed.text
    run = changed.json()
    assert (run["name"], run["tags"], run["note"], run["facts"]) == (
        "A100 rail 3",
        ["Rail-3", "nightly", "rail-3"],
        "after the firmware update",
        {"Switch": "QM9700", "firmware": "31.2010"},
    )
    assert ids(client, fact="switch=qm9700") == [1]
    assert ids(client, fact="nic") == [2]  # its old facts are gone
    with database.read_session() as session:
        assert sorted(session.exec(select(RunTag.folded_tag).where(RunTag.run_id == 1)).all()) == ["nightly", "rail-3"]
    for body, detail in (
        ({"name": " "}, "name: a run needs a name"),
        ({"facts": {"nic": " "}}, "facts: nic: give a value of 1 to 200 characters"),
        ({"facts": {"a=b": "c"}}, "facts: 'a=b': a key is 1 to 64 characters without '='"),
        ({"facts": {"NIC": "x", "nic": "y"}}, "facts: 'nic' is given twice"),
        ({"plan_id": 99}, "no plan with id 99"),
    ):
        refused = client.patch("/api/runs/1", json=body)
        assert refused.json()["detail"] == detail, body
    assert client.get("/api/runs/1").json()["name"] == "A100 rail 3"  # each refusal changed nothing


def test_linking_a_run_to_a_plan_reads_it_with_the_plans_network_and_unlinking_without(client, three_runs):
    plan = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "gpus": 16}).json()
    assert client.get("/api/runs/3/stats").json()["groups"][0]["ideal_time_us"] is None
    linked = client.patch("/api/runs/3", json={"plan_id": plan["id"]}).json()
    assert linked["plan_id"] == plan["id"]
    assert ids(client, plan=plan["id"]) == [3]
    # The plan's network gives each group an ideal time the import had none for.
    assert client.get("/api/runs/3/stats").json()["groups"][0]["ideal_time_us"] is not None
    assert client.patch("/api/runs/3", json={"plan_id": None}).json()["plan_id"] is None
    assert client.get("/api/runs/3/stats").json()["groups"][0]["ideal_time_us"] is None


def test_deleting_a_run_says_which_comparisons_show_it_and_they_show_the_rest(client, database, three_runs):
    comparison = client.post("/api/comparisons", json={"name": "A vs V", "run_ids": [1, 2]}).json()
    assert client.get("/api/runs/1/deletion").json() == {
        "run_id": 1,
        "comparisons": [{"id": comparison["id"], "name": "A vs V", "runs_left": 1}],
    }
    assert client.get("/api/runs/3/deletion").json() == {"run_id": 3, "comparisons": []}
    assert client.delete("/api/runs/1").status_code == 204
    assert client.get("/api/runs/1").status_code == 404
    assert ids(client, fact="nccl") == [] and ids(client, tag="fabric-a") == []
    with database.read_session() as session:
        assert session.exec(select(RunFact).where(RunFact.run_id == 1)).all() == []
    assert client.get(f"/comparisons/{comparison['id']}").status_code == 200


def test_a_plan_is_renamed_and_deleted_unlinking_its_runs(client, three_runs):
    plan = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "gpus": 16}).json()
    for run_id in (1, 3):
        assert client.patch(f"/api/runs/{run_id}", json={"plan_id": plan["id"]}).status_code == 200
    renamed = client.patch(f"/api/plans/{plan['id']}", json={"name": "MLP on 16", "tags": ["b"], "note": "n"}).json()
    assert (renamed["name"], renamed["tags"], renamed["note"]) == ("MLP on 16", ["b"], "n")
    assert [p["name"] for p in client.get("/api/plans").json()] == ["MLP on 16"]
    # A saved comparison reading run 2 with the plan (run 2 is not linked to it) is named too.
    reading = {"name": "2 with the plan", "run_ids": [2, 3], "plans": {"2": plan["id"]}}
    comparison = client.post("/api/comparisons", json=reading).json()
    client.post("/api/comparisons", json={"name": "own plans", "run_ids": [1, 3]})
    expected = {
        "plan_id": plan["id"],
        "name": "MLP on 16",
        "unlinked_run_ids": [1, 3],
        "comparisons": [{"id": comparison["id"], "name": "2 with the plan"}],
    }
    assert client.get(f"/api/plans/{plan['id']}/deletion").json() == expected
    assert client.delete(f"/api/plans/{plan['id']}").json() == expected
    assert client.get(f"/api/plans/{plan['id']}").status_code == 404
    assert client.get(f"/api/comparisons/{comparison['id']}").status_code == 200
    assert [client.get(f"/api/runs/{run_id}").json()["plan_id"] for run_id in (1, 3)] == [None, None]
    assert client.get("/api/runs/3/stats").json()["groups"][0]["ideal_time_us"] is None


def test_a_comparison_and_its_share_links_are_renamed_and_deleted_together(client, database, three_runs):
    comparison = client.post("/api/comparisons", json={"name": "c", "run_ids": [1, 2]}).json()
    path = f"/api/comparisons/{comparison['id']}"
    share = client.post(f"{path}/shares", json={"label": "vendor"}).json()
    second = client.post(f"{path}/shares", json={}).json()
    client.delete(f"{path}/shares/{second['id']}")
    assert share["label"] == "vendor" and second["label"] == ""
    relabelled = client.patch(f"{path}/shares/{second['id']}", json={"label": "  team review "}).json()
    assert (relabelled["label"], relabelled["state"]) == ("team review", "revoked")
    changed = client.patch(path, json={"name": "A100 vs V100", "tags": ["review"], "note": "for Tuesday"}).json()
    assert (changed["name"], changed["tags"], changed["note"]) == ("A100 vs V100", ["review"], "for Tuesday")
    account = {"comparison_id": comparison["id"], "name": "A100 vs V100", "share_links": 2, "active_share_links": 1}
    assert client.get(f"{path}/deletion").json() == account
    assert client.delete(path).json() == account
    assert client.get(path).status_code == 404
    assert client.get(share["path"]).status_code == 404
    with database.read_session() as session:
        assert session.exec(select(ShareLink)).all() == []
    assert ids(client) == [3, 2, 1]  # its runs stay


def test_a_plan_or_comparison_change_names_what_it_lacks_and_changes_nothing(client, three_runs):
    plan = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "gpus": 16}).json()
    comparison = client.post("/api/comparisons", json={"name": "c", "run_ids": [1, 2]}).json()
    for path, name in ((f"/api/plans/{plan['id']}", plan["name"]), (f"/api/comparisons/{comparison['id']}", "c")):
        empty = client.patch(path, json={})
        assert (empty.status_code, empty.json()["detail"]) == (422, "changes: give at least one of name, tags, note")
        blank = client.patch(path, json={"name": "  ", "note": "kept?"})
        what = path.split("/")[2][:-1]
        assert (blank.status_code, blank.json()["detail"]) == (422, f"name: a {what} needs a name")
        assert (client.get(path).json()["name"], client.get(path).json()["note"]) == (name, "")
        trimmed = client.patch(path, json={"tags": [" b", "a ", "b", " "]}).json()
        assert trimmed["tags"] == ["a", "b"]


def test_an_unknown_table_says_what_the_web_form_can_do(client):
    response = client.post("/api/runs", files={"file": ("odd.csv", b"when,what\n1,2\n")})
    assert response.status_code == 400
    assert response.json()["detail"].endswith(
        "say which column holds what (the upload form's Column mapping, --column-map or column_map=, e.g. "
        "duration=wall_ms,size=payload_bytes) or pick its Format (--format, format=)"
    )
    mapped = client.post(
        "/api/runs", files={"file": ("odd.csv", b"when,what_ms\n1,2\n2,3\n")}, data={"column_map": "duration=what_ms"}
    )
    assert mapped.status_code == 201, mapped.text


def test_a_plan_being_simulated_is_kept_and_its_finished_simulations_go_with_it(client, database: Database):
    plan = client.post("/api/plans", json={"model": "fashion-mnist-mlp", "strategy": "data", "gpus": 4}).json()
    jobs.create(database, JobRecord(id="sim-1", kind="simulation", plan_id=plan["id"], request={}))
    refused = client.delete(f"/api/plans/{plan['id']}")
    assert (refused.status_code, refused.json()["detail"]) == (
        409,
        f"plan {plan['id']} is being simulated (job sim-1): cancel the simulation first",
    )
    jobs.finish(database, "sim-1", "succeeded", progress={}, result={"ranks": []})
    assert client.delete(f"/api/plans/{plan['id']}").status_code == 200
    assert jobs.newest(database, kind="simulation", plan_id=plan["id"]) == []
