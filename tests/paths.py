"""Where the tests' inputs live, defined once for every test file (``from paths import RESULTS``)."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
RESULTS = FIXTURES / "results"
# The repository's own nccl-tests logs (sources in results/SOURCES.md).
NCCL_TESTS = RESULTS / "nccl-tests"
MODELS = FIXTURES / "models"
LLAMA_2_7B_CONFIG = FIXTURES / "hf_configs" / "Llama-2-7b-hf" / "config.json"
MIXTRAL_8X7B_CONFIG = FIXTURES / "hf_configs" / "Mixtral-8x7B-v0.1" / "config.json"
# The team's shared material beside the repository: seed tutorials and nccl-tests logs.
SHARED = REPO_ROOT.parent / "shared"
SEEDS = SHARED / "seeds"
SHARED_NCCL = SHARED / "fixtures" / "nccl-tests"
# ASTRA-sim's analytical binary as built beside the repository (its README says how); CI has it.
ASTRA_SIM = SHARED / "tools" / "astra-sim" / "bin" / "AstraSim_Analytical_Congestion_Unaware"
