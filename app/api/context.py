"""What the routes share for the life of the process; built once in main.py's lifespan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.core.config import Settings
from app.core.storage import Storage
from app.db.session import Database

if TYPE_CHECKING:  # both import torch, which must wait until its environment is set
    from app.ml.query_service import QueryService
    from app.worker.supervisor import Worker


@dataclass
class AppContext:
    settings: Settings
    database: Database
    storage: Storage
    secret_key: str
    query_service: QueryService
    device_report: dict[str, Any]
    worker: Worker | None = None
    extra: dict[str, Any] = field(default_factory=dict)
