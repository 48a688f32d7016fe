"""Checkpoints of a running job: everything needed to continue it exactly where it was.

A checkpoint is a directory `step-000123/` holding the LoRA adapter as a normal, servable
adapter (safetensors + peft's config + qatune's metadata) and `training_state.pt` with the
optimizer, the scheduler, the loss scaler, the random number generators and the loop's
position (the data order itself follows from the seed: resuming at step N takes the
schedule's step N next). It is written to a hidden directory and renamed into place, so
a reader (or a resumed run) sees a whole checkpoint or none. The newest few are kept.

`training_state.pt` is written by qatune and read with `torch.load(weights_only=True)`:
tensors and plain containers only, no pickled code. Torch is imported only where it is
used: the API process lists checkpoints before its torch environment is set.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.ml.training.adapter_metadata import ADAPTER_METADATA, AdapterMetadata, now_iso
from app.ml.training.progress import LoopProgress

if TYPE_CHECKING:
    import torch

    from app.ml.training.best_weights import BestEpoch, BestWeights

    KeptCopy = BestWeights | BestEpoch

STATE_FILE = "training_state.pt"
PREFIX = "step-"
EVERY_FRACTION = 0.1  # at most a tenth of the run is lost to an interruption...
EVERY_SECONDS = 60.0  # ...or about a minute, whichever comes first
MIN_SECONDS = 2.0  # but never more often than this: saving is not free on large adapters
KEEP_CHECKPOINTS = 3  # the newest few; older ones go as new ones are written


@dataclass(frozen=True)
class CheckpointInfo:
    step: int
    path: Path
    train_loss: float | None


def checkpoint_dirs(directory: Path) -> list[Path]:
    """Whole checkpoints, oldest first."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if p.name.startswith(PREFIX) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.removeprefix(PREFIX)))


def latest_checkpoint(directory: Path) -> Path | None:
    found = [p for p in checkpoint_dirs(directory) if (p / STATE_FILE).is_file()]
    return found[-1] if found else None


def step_of(path: Path) -> int:
    return int(path.name.removeprefix(PREFIX))


class Checkpointer:
    def __init__(
        self,
        directory: Path,
        *,
        total_steps: int,
        metadata: AdapterMetadata,
        keep: int = KEEP_CHECKPOINTS,
    ) -> None:
        self.directory = directory
        self.keep = keep
        self.metadata = metadata
        self.every_steps = max(1, math.ceil(total_steps * EVERY_FRACTION))
        self.last_step = 0
        self.last_time = time.monotonic()

    def due(self, step: int) -> bool:
        since = time.monotonic() - self.last_time
        if since < MIN_SECONDS:
            return False
        return step - self.last_step >= self.every_steps or since >= EVERY_SECONDS

    def resumed_at(self, step: int) -> None:
        self.last_step, self.last_time = step, time.monotonic()

    def save(
        self,
        model: Any,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        scaler: Any,
        progress: LoopProgress,
        kept: KeptCopy | None = None,
    ) -> CheckpointInfo:
        """`kept`: the best weights the run has kept so far (best_weights.py), if any."""
        import torch

        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / f"{PREFIX}{progress.step:06d}"
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=self.directory))
        try:
            model.save_pretrained(staging, safe_serialization=True)
            loss = progress.losses[-1] if progress.losses else None  # at this step, as charted
            metadata = AdapterMetadata(
                base_model=self.metadata.base_model,
                system_prompt=self.metadata.system_prompt,
                hyperparameters=self.metadata.hyperparameters,
                plan=self.metadata.plan,
                metrics={"step": progress.step, "train_loss": loss},
                created_at=now_iso(),
                base_source=self.metadata.base_source,
            )
            (staging / ADAPTER_METADATA).write_text(json.dumps(asdict(metadata), indent=2))
            torch.save(
                {
                    "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(),
                    "scaler": scaler.state_dict() if scaler is not None else None,
                    "rng": _rng_states(),
                    "progress": asdict(progress),
                    "kept": kept.state_dict() if kept is not None else None,
                },
                staging / STATE_FILE,
            )
            _fsync_tree(staging)
            shutil.rmtree(target, ignore_errors=True)  # a run that died after this step
            os.replace(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        self.last_step, self.last_time = progress.step, time.monotonic()
        for old in checkpoint_dirs(self.directory)[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return CheckpointInfo(progress.step, target, loss)


def load_checkpoint(
    path: Path,
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: Any,
    kept: KeptCopy | None = None,
) -> LoopProgress:
    """Put the run back as it was at the checkpoint (`kept` too); returns the loop's
    position."""
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    device = next(p.device for p in model.parameters())
    weights = load_file(path / "adapter_model.safetensors", device=str(device))
    set_peft_model_state_dict(model, weights)
    state = torch.load(path / STATE_FILE, map_location=device, weights_only=True)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    if scaler is not None and state["scaler"] is not None:
        scaler.load_state_dict(state["scaler"])
    _restore_rng(state["rng"])
    if kept is not None and state.get("kept"):
        kept.load_state_dict(state["kept"])
    return LoopProgress(**state["progress"])


def drop_training_state(directory: Path) -> None:
    """After success the checkpoints stay as servable adapters; their optimizer state goes."""
    for checkpoint in checkpoint_dirs(directory):
        (checkpoint / STATE_FILE).unlink(missing_ok=True)


def _rng_states() -> dict[str, Any]:
    import torch

    states: dict[str, Any] = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    if torch.backends.mps.is_available():
        states["mps"] = torch.mps.get_rng_state()
    return states


def _restore_rng(states: dict[str, Any]) -> None:
    import torch

    torch.set_rng_state(states["torch"].cpu())
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in states["cuda"]])
    if "mps" in states and torch.backends.mps.is_available():
        torch.mps.set_rng_state(states["mps"].cpu())


def _fsync_tree(directory: Path) -> None:
    """The checkpoint's bytes reach the disk before its name does (a host crash)."""
    for path in directory.iterdir():
        with path.open("rb") as handle:
            os.fsync(handle.fileno())
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
