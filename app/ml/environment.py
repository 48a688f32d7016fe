"""Environment that PyTorch reads once, at import: set it before anything imports torch."""

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class TorchEnvironment:
    mps_fallback: bool = True
    mps_high_watermark_ratio: float | None = None
    mps_low_watermark_ratio: float | None = None

    def apply(self) -> None:
        # Ops MPS lacks run on the CPU instead of raising NotImplementedError mid-training.
        os.environ.setdefault("PYTORCH_ENABLE_MPS_FALLBACK", "1" if self.mps_fallback else "0")
        if self.mps_high_watermark_ratio is not None:
            os.environ["PYTORCH_MPS_HIGH_WATERMARK_RATIO"] = str(self.mps_high_watermark_ratio)
        if self.mps_low_watermark_ratio is not None:
            os.environ["PYTORCH_MPS_LOW_WATERMARK_RATIO"] = str(self.mps_low_watermark_ratio)
        # The hub's retries would turn "offline" into minutes of waiting; fail in seconds.
        os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "5")
        os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "10")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        # qatune compiles nothing, but bitsandbytes wraps its fallback kernels in
        # torch.compile when peft imports it, which imports the compiler: ~2 s of a core in
        # every process that trains or serves. Disabled, those kernels run as written.
        os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
