"""evals, their runs and the runs' output items

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 04:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _owned(table: str, parent: str, column: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        [column], [f"{parent}.id"], name=op.f(f"fk_{table}_{column}_{parent}"), ondelete="CASCADE"
    )


def upgrade() -> None:
    op.create_table(
        "evals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("data_source_config", sa.JSON(), nullable=False),
        sa.Column("testing_criteria", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        _owned("evals", "users", "owner_id"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_evals")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "eval_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("eval_id", sa.Integer(), nullable=False),
        sa.Column("owner_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("model", sa.String(length=600), nullable=True),
        sa.Column("data_source", sa.JSON(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        _owned("eval_runs", "evals", "eval_id"),
        _owned("eval_runs", "users", "owner_id"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_runs")),
        sqlite_autoincrement=True,
    )
    op.create_table(
        "eval_output_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=8), nullable=False),
        sa.Column("item", sa.JSON(), nullable=False),
        sa.Column("sample", sa.JSON(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        _owned("eval_output_items", "eval_runs", "run_id"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_eval_output_items")),
        sqlite_autoincrement=True,
    )
    for table, column in (
        ("evals", "owner_id"),
        ("eval_runs", "eval_id"),
        ("eval_runs", "owner_id"),
        ("eval_output_items", "run_id"),
    ):
        with op.batch_alter_table(table) as batch_op:
            batch_op.create_index(batch_op.f(f"ix_{table}_{column}"), [column], unique=False)


def downgrade() -> None:
    op.drop_table("eval_output_items")
    op.drop_table("eval_runs")
    op.drop_table("evals")
