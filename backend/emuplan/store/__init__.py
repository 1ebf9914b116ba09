"""Persistence: SQLModel tables, the engine and its sessions, and Alembic migration on start."""
