"""Platforms describe what NCCL's cost model needs (the GPU generation, the scale-up link, NVLink SHARP)
instead of one α per level: the expected curve is NCCL's own model (results/analysis/nccl_model.py), whose latencies
are per algorithm, protocol and link.

Runs get ``measured_at``: when a run was measured, where the user says (upload, ``emuplan import
--measured-at``, ``PATCH /api/runs/{id}``), so a series orders back-filled logs where they belong.

Every stored run is judged again (``services.rejudge``): its expected curve is NCCL's, and a run with no platform
is now "not judged" rather than "pass".

A stored profile's generation is what its scale-up rate says (900 GB/s and up: Blackwell, 450: Hopper, else
Ampere), its link NVLink, and NVLS on for Hopper and Blackwell: the same inference ``Platform`` makes for a
profile that leaves them out.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

from emuplan.services.rejudge import judge_every_run

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("platform") as batch:
        batch.add_column(sa.Column("gpu_generation", sa.String(), nullable=False, server_default="ampere"))
        batch.add_column(sa.Column("scale_up_link", sa.String(), nullable=False, server_default="nvlink"))
        batch.add_column(sa.Column("nvls", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute(
        "UPDATE platform SET gpu_generation = CASE WHEN scale_up_gb_s >= 900 THEN 'blackwell' "
        "WHEN scale_up_gb_s >= 450 THEN 'hopper' ELSE 'ampere' END"
    )
    op.execute("UPDATE platform SET nvls = (gpu_generation IN ('hopper', 'blackwell'))")
    with op.batch_alter_table("platform") as batch:
        batch.drop_column("scale_up_alpha_us")
        batch.drop_column("scale_out_alpha_us")
    judge_every_run(op.get_bind())
    op.add_column("run", sa.Column("measured_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("run", "measured_at")
    with op.batch_alter_table("platform") as batch:
        batch.add_column(sa.Column("scale_up_alpha_us", sa.Float(), nullable=False, server_default="0.47"))
        batch.add_column(sa.Column("scale_out_alpha_us", sa.Float(), nullable=False, server_default="2.7"))
        batch.drop_column("nvls")
        batch.drop_column("scale_up_link")
        batch.drop_column("gpu_generation")
