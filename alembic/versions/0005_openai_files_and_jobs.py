"""what the OpenAI API needs: a file's purpose, a job's suffix, labels, validation file

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 22:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch_op:
        batch_op.add_column(
            sa.Column("purpose", sa.String(length=32), nullable=False, server_default="fine-tune")
        )
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("validation_dataset_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("suffix", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("labels", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column("model_deleted_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_jobs_validation_dataset_id_datasets"),
            "datasets",
            ["validation_dataset_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_jobs_validation_dataset_id_datasets"), type_="foreignkey"
        )
        for column in ("model_deleted_at", "labels", "suffix", "validation_dataset_id"):
            batch_op.drop_column(column)
    with op.batch_alter_table("datasets") as batch_op:
        batch_op.drop_column("purpose")
