"""what a dataset holds (datasets.kind: qa, chat, tools, preference, reinforcement), so that
a job's page can offer files of its own kind first; null for files uploaded before

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as table:
        table.add_column(sa.Column("kind", sa.String(length=16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as table:
        table.drop_column("kind")
