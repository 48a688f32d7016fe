"""a job event's message and a failed job's or eval run's error kept as sentences (a
template and its values), so that each reader reads them in their own language

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26 08:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("job_events") as batch_op:
        batch_op.add_column(sa.Column("said", sa.JSON(), nullable=True))
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("error_said", sa.JSON(), nullable=True))
    with op.batch_alter_table("eval_runs") as batch_op:
        batch_op.add_column(sa.Column("error_said", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("eval_runs") as batch_op:
        batch_op.drop_column("error_said")
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("error_said")
    with op.batch_alter_table("job_events") as batch_op:
        batch_op.drop_column("said")
