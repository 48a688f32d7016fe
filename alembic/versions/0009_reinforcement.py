"""a reinforcement job's grader (OpenAI's grader JSON) and its judge models, as resolved for
the job's owner when it was made

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25 07:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("grader", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("judges", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("judges")
        batch_op.drop_column("grader")
