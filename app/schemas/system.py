from pydantic import BaseModel

from app.ml.device import Capabilities, DeviceBenchmark, DevicePlan
from app.ml.serving.requests import EngineStats


class DeviceReport(BaseModel):
    """The device plan of this process: what training and serving use here, and why."""

    device: str
    precision: str
    loss_scaling: bool
    memory_budget_gb: float
    reasons: list[str]
    requested: str
    benchmark: DeviceBenchmark | None
    capabilities: Capabilities

    @classmethod
    def of(cls, plan: DevicePlan) -> "DeviceReport":
        return cls(
            device=plan.device,
            precision=plan.precision,
            loss_scaling=plan.loss_scaling,
            memory_budget_gb=plan.memory_budget_gb,
            reasons=plan.reasons,
            requested=plan.requested,
            benchmark=plan.benchmark,
            capabilities=plan.capabilities,
        )


class EngineReport(BaseModel):
    base_model: str
    running: int
    waiting: int
    adapters: list[str]
    adapter_megabytes: float

    @classmethod
    def of(cls, stats: "EngineStats") -> "EngineReport":
        return cls(
            base_model=stats.base_model,
            running=stats.running,
            waiting=stats.waiting,
            adapters=stats.adapters,
            adapter_megabytes=round(stats.adapter_bytes / 2**20, 2),
        )
