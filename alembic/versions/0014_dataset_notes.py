"""what reading a dataset's file passed over (datasets.notes: a sheet without a table, a
column no field is read from), said beside the dataset; null where nothing was

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 19:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as table:
        table.add_column(sa.Column("notes", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as table:
        table.drop_column("notes")
