from pydantic import BaseModel

from app.ml.device import Capabilities, DeviceBenchmark, DevicePlan


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
