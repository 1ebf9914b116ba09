"""Persistence: SQLModel tables (one UTC datetime column type), the engine and its sessions, Alembic
migration on start, and one query module per stored kind (its not-found error a ``rows.NotFound``).

Stored plans are read back only as ``PlanDocument`` (``plans.plan_document``). May import the domain
packages (``workload``, ``results``, ``charts``, ``measure``, ``sandbox``) and ``settings``, and ``planning`` for a
plan's model (``workload_export``); never FastAPI, ``api`` or ``cli``.
"""
