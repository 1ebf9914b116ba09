"""Persistence: SQLModel tables (one UTC datetime column type), the engine and its sessions, Alembic
migration on start, and one query module per stored kind (its not-found error a ``rows.NotFound``).

Only persists and reads rows and blobs: what goes into them (parsing, statistics, verdicts, figures) is
``services/``, which builds on this package. Stored plans are read back only as ``PlanDocument``
(``plans.plan_document``). Imports no domain logic (``tests/unit/test_module_imports.py`` names the few data types
it may), never ``services``, FastAPI, ``api`` or ``cli``.
"""
