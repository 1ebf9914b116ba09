"""Accounts, their sessions and API tokens, and the failed sign-ins that rate-limit password guessing.

Used only when ``EMUPLAN_AUTH=accounts``; the tables stay empty otherwise.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# Ids never reused on SQLite (see 0003); PostgreSQL sequences already never go back.
NEVER_REUSE_IDS = {"sqlite_autoincrement": True}
# Ids are int64 like every other (see 0005): BIGINT on PostgreSQL, the rowid INTEGER on SQLite.
DATABASE_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _timestamp(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _account_id() -> sa.Column:
    return sa.Column("account_id", DATABASE_ID, sa.ForeignKey("account.id", ondelete="CASCADE"), nullable=False)


def upgrade() -> None:
    op.create_table(
        "account",
        sa.Column("id", DATABASE_ID, primary_key=True),
        sa.Column("name", sa.String(), nullable=False, unique=True),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("password_hash", sa.String(), nullable=False),
        _timestamp("created_at"),
        **NEVER_REUSE_IDS,
    )
    op.create_table(
        "account_session",
        sa.Column("id", DATABASE_ID, primary_key=True),
        _account_id(),
        sa.Column("token_hash", sa.String(), nullable=False, unique=True),
        _timestamp("created_at"),
        _timestamp("expires_at"),
        **NEVER_REUSE_IDS,
    )
    op.create_index("ix_account_session_account_id", "account_session", ["account_id"])
    op.create_table(
        "api_token",
        sa.Column("id", DATABASE_ID, primary_key=True),
        _account_id(),
        sa.Column("label", sa.String(), nullable=False),
        sa.Column("token_hash", sa.String(), nullable=False, unique=True),
        _timestamp("created_at"),
        _timestamp("expires_at", nullable=True),
        _timestamp("revoked_at", nullable=True),
        **NEVER_REUSE_IDS,
    )
    op.create_index("ix_api_token_account_id", "api_token", ["account_id"])
    op.create_table(
        "sign_in_failure",
        sa.Column("id", DATABASE_ID, primary_key=True),
        sa.Column("account_name", sa.String(), nullable=False),
        sa.Column("address", sa.String(), nullable=False),
        _timestamp("failed_at"),
    )
    op.create_index("ix_sign_in_failure_account_name", "sign_in_failure", ["account_name"])
    op.create_index("ix_sign_in_failure_address", "sign_in_failure", ["address"])
    op.create_index("ix_sign_in_failure_failed_at", "sign_in_failure", ["failed_at"])


def downgrade() -> None:
    op.drop_table("sign_in_failure")
    op.drop_table("api_token")
    op.drop_table("account_session")
    op.drop_table("account")
