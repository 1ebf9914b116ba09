"""The shared ASTRA-sim build the simulation tests run (``paths.ASTRA_SIM``), and their skip where it is absent."""

import pytest

from paths import ASTRA_SIM

requires_astra_sim = pytest.mark.skipif(
    not ASTRA_SIM.is_file(), reason=f"ASTRA-sim is not built at {ASTRA_SIM} (../shared/tools/astra-sim/README.md)"
)
