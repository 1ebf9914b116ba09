"""The audit's 16,384-rank simulation over real HTTP (issue 42): refused with its estimate before anything starts,
nothing recorded, the server's memory as it was (it grew from 1.5 to 8.2 GB in 42 s)."""

import httpx2
import pytest

from astra_sim_binary import requires_astra_sim
from emuplan.settings import Settings
from live_server import LiveServer
from paths import ASTRA_SIM

pytestmark = [pytest.mark.both_databases, requires_astra_sim]

PLAN_70B = {"model": "llama-3-70b", "mode": "framework", "strategy": "hybrid", "tp": 8, "pp": 16, "dp": 128}


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, demo=False, astra_sim=ASTRA_SIM, simulator_memory_mb=4096)


def rss_mb(field: str) -> float:
    """The server's (this process's: the live server runs on a thread of it) VmRSS or VmHWM, MB."""
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field)) / 1024


def test_a_16384_rank_simulation_is_refused_with_its_estimate_before_it_starts(live_server: LiveServer) -> None:
    with httpx2.Client(base_url=live_server.url, timeout=120) as client:
        saved = client.post("/api/plans", json=PLAN_70B)
        assert saved.status_code == 201, saved.text
        plan_id = saved.json()["id"]
        before = rss_mb("VmRSS")
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")  # VmHWM from here
        answer = client.post(f"/api/plans/{plan_id}/simulate", json={})
        grown = rss_mb("VmHWM") - before
        assert (answer.status_code, answer.json()) == (
            422,
            {
                "detail": "gpus: ASTRA-sim would need about 139,580 MB for this plan (16,384 ranks, 7,578,624 trace "
                "nodes in all; its memory grows with the nodes and the square of the ranks), more than its limit of "
                "4,096 MB (EMUPLAN_SIMULATOR_MEMORY_MB); simulate a plan of fewer ranks"
            },
        )
        assert client.get("/api/simulations", params={"plan_id": plan_id}).json() == []
    assert grown < 300, f"the server grew by {grown:.0f} MB refusing it"
