"""Measure a plan on real processes: run its collectives with torch.distributed and time them.

``workload`` turns a stored plan document into the ordered list of collectives to run, ``worker`` is
the per-rank program (``python -m emuplan.measure``, also under ``torchrun``), ``timings`` turns every
rank's start/end timestamps into the per-iteration CSV that ``emuplan import`` reads, and
``launcher`` starts the workers as local processes and cleans up after them.

Nothing here imports torch at module level except ``worker``, so the CLI and the API stay light.
Owns the measurement options and their defaults and limits (``options``, standard library only: every
``emuplan`` command imports it). May import ``emuplan.workload``; never FastAPI or the database
(``services.measurements`` stores the result).
"""
