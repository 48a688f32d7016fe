"""a job that fine-tunes a fine-tuned model: the model it started from; a job's method
(supervised or dpo)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24 17:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("parent_job_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("start_model", sa.String(length=600), nullable=True))
        batch_op.add_column(
            sa.Column("method", sa.String(length=16), nullable=False, server_default="supervised")
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("method")
        batch_op.drop_column("start_model")
        batch_op.drop_column("parent_job_id")
