"""checkpoints, pause, and failures counted apart from restarts

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 19:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("failures", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("checkpoint_step", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("interrupted_at_step", sa.Integer(), nullable=True))
        batch_op.add_column(
            sa.Column("pause_requested", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        for column in ("pause_requested", "interrupted_at_step", "checkpoint_step", "failures"):
            batch_op.drop_column(column)
