"""resolved hyperparameters in their own column; one hyperparameter vocabulary

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 18:30:00
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_BATCH = 8


def _one_vocabulary(old: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """0001 stored `batch_size` as the micro-batch beside `gradient_accumulation_steps`, and
    the resolution inside the request; now `batch_size` is the examples per step."""
    request = dict(old)
    resolved = request.pop("resolved", None)
    micro = request.pop("batch_size", "auto")
    accumulation = request.pop("gradient_accumulation_steps", "auto")
    given_micro = micro if isinstance(micro, int) else None
    given_accumulation = accumulation if isinstance(accumulation, int) else None
    if given_micro and given_accumulation:
        batch: int | str = given_micro * given_accumulation
    elif given_micro:
        batch = max(given_micro, DEFAULT_BATCH // given_micro * given_micro)
    elif given_accumulation:
        batch = max(given_accumulation, DEFAULT_BATCH)
    else:
        batch = "auto"
    request["batch_size"] = batch
    request["micro_batch_size"] = given_micro or "auto"
    if isinstance(resolved, dict) and "effective_batch_size" in resolved:
        resolved = {**resolved, "batch_size": resolved.pop("effective_batch_size")}
    return request, resolved


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.add_column(sa.Column("resolved_hyperparameters", sa.JSON(), nullable=True))
    jobs = sa.table(
        "jobs",
        sa.column("id", sa.Integer),
        sa.column("hyperparameters", sa.JSON),
        sa.column("resolved_hyperparameters", sa.JSON),
    )
    connection = op.get_bind()
    for job_id, stored in connection.execute(sa.select(jobs.c.id, jobs.c.hyperparameters)):
        old = json.loads(stored) if isinstance(stored, str) else (stored or {})
        request, resolved = _one_vocabulary(old)
        connection.execute(
            jobs.update()
            .where(jobs.c.id == job_id)
            .values(hyperparameters=request, resolved_hyperparameters=resolved)
        )


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch_op:
        batch_op.drop_column("resolved_hyperparameters")
