"""Initial schema: model definitions, plans, runs with their columnar tables, comparisons, share links.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _created_at() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "model_definition",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("source_kind", sa.String(), nullable=False),
        sa.Column("file_name", sa.String(), nullable=True),
        sa.Column("content_sha256", sa.String(), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=True),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("inventory", sa.JSON(), nullable=False),
        sa.Column("parameter_count", sa.BigInteger(), nullable=False),
        _created_at(),
    )
    op.create_index("ix_model_definition_content_sha256", "model_definition", ["content_sha256"])

    op.create_table(
        "plan",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("model_name", sa.String(), nullable=False),
        sa.Column(
            "model_definition_id",
            sa.Integer(),
            sa.ForeignKey("model_definition.id", ondelete="SET NULL"),
            nullable=True,
        ),
        sa.Column("strategy", sa.String(), nullable=False),
        sa.Column("mode", sa.String(), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("workload", sa.JSON(), nullable=False),
        _created_at(),
    )

    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("plan_id", sa.Integer(), sa.ForeignKey("plan.id", ondelete="SET NULL"), nullable=True),
        sa.Column("strategy", sa.String(), nullable=True),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("source_format", sa.String(), nullable=False),
        sa.Column("origin", sa.String(), nullable=False),
        sa.Column("origin_detail", sa.String(), nullable=False),
        sa.Column("file_name", sa.String(), nullable=True),
        sa.Column("content_sha256", sa.String(), nullable=True),
        sa.Column("sample_count", sa.Integer(), nullable=False),
        sa.Column("ranks", sa.Integer(), nullable=True),
        sa.Column("hosts", sa.Integer(), nullable=True),
        sa.Column("warnings", sa.JSON(), nullable=False),
        sa.Column("summary", sa.JSON(), nullable=False),
        _created_at(),
    )
    op.create_index("ix_run_content_sha256", "run", ["content_sha256"])

    op.create_table(
        "run_table",
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("run.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("kind", sa.String(), primary_key=True),
        sa.Column("row_count", sa.BigInteger(), nullable=False),
        sa.Column("parquet", sa.LargeBinary(), nullable=False),
    )

    op.create_table(
        "comparison",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("run_ids", sa.JSON(), nullable=False),
        sa.Column("baseline_run_id", sa.Integer(), nullable=True),
        sa.Column("options", sa.JSON(), nullable=False),
        _created_at(),
    )

    op.create_table(
        "share_link",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column(
            "comparison_id",
            sa.Integer(),
            sa.ForeignKey("comparison.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("token_hash", sa.String(), nullable=False, unique=True),
        _created_at(),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_share_link_comparison_id", "share_link", ["comparison_id"])


def downgrade() -> None:
    op.drop_table("share_link")
    op.drop_table("comparison")
    op.drop_table("run_table")
    op.drop_index("ix_run_content_sha256", table_name="run")
    op.drop_table("run")
    op.drop_table("plan")
    op.drop_index("ix_model_definition_content_sha256", table_name="model_definition")
    op.drop_table("model_definition")
