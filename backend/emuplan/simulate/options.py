"""The simulation's limits and defaults, standard library only: every ``emuplan`` command imports them for its help."""

DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 3600.0
