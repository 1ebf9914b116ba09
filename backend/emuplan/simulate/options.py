"""The simulation's limits and defaults, standard library only: every ``emuplan`` command imports them for its help."""

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 3600.0
# What ASTRA-sim may hold (EMUPLAN_SIMULATOR_MEMORY_MB): gpt2 TP2×PP2×DP2 takes ~0.4 GB, 1,024 small ranks ~0.5 GB.
DEFAULT_MEMORY_MB = 4096
