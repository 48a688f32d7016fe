"""a progress event's figures beside it (job_curve), so that a long job's chart is averaged
in the database instead of read out of every event's JSON; filled from the events there are

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-29 01:00:00
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 5000


def upgrade() -> None:
    curve = op.create_table(
        "job_curve",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("loss", sa.Float(), nullable=True),
        sa.Column("reward_margin", sa.Float(), nullable=True),
        sa.Column("reward_mean", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_job_curve_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "seq", name="pk_job_curve"),
    )
    events = sa.table(
        "job_events", sa.column("job_id"), sa.column("seq"), sa.column("data", sa.JSON())
    )
    connection = op.get_bind()
    rows: list[dict[str, Any]] = []
    for job_id, seq, data in connection.execute(sa.select(events)).yield_per(BATCH):
        data = json.loads(data) if isinstance(data, str) else data
        if isinstance(data, dict) and data.get("kind") == "progress":
            rows.append(
                {"job_id": job_id, "seq": seq, "step": data.get("step") or 0,
                 "loss": data.get("loss"), "reward_margin": data.get("reward_margin"),
                 "reward_mean": data.get("reward_mean")}
            )  # fmt: skip
        if len(rows) >= BATCH:
            connection.execute(curve.insert(), rows)
            rows = []
    if rows:
        connection.execute(curve.insert(), rows)


def downgrade() -> None:
    op.drop_table("job_curve")
