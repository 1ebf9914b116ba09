"""Persistence: SQLModel tables (one UTC datetime column type), the engine and its sessions, Alembic
migration on start, and one query module per stored kind (its not-found error a ``rows.NotFound``).

Stored plans are read back only as ``PlanDocument`` (``plans.plan_document``). May import the domain
packages (``workload``, ``results``, ``charts``, ``measure``, ``sandbox``) and ``settings``; never ``services.plans``
(which builds on the store), FastAPI, ``api`` or ``cli`` (``tests/unit/test_module_imports.py``).
"""

# Registers the listener that keeps each run's series figures beside its summary (store.trend): whatever
# stores or relabels a run imports this package first.
from emuplan.store import trend  # noqa: E402, F401
