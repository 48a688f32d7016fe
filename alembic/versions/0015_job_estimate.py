"""about how long a job's run takes, estimated when it is asked for (jobs.estimated_run_seconds),
so that a queued job can say when it starts; null for jobs asked for before

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 20:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as table:
        table.add_column(sa.Column("estimated_run_seconds", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as table:
        table.drop_column("estimated_run_seconds")
