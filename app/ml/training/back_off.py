"""Out-of-memory back-off: after an out-of-memory error the step is retried with half the
micro-batch, then with activations checkpointed, keeping the effective batch; after
MAX_OOM_RETRIES the run fails with the figures and what to change."""

from dataclasses import dataclass

from app.core.language import said
from app.ml.events import OutOfMemory, TrainingEvent
from app.ml.memory import memory_snapshot
from app.ml.training.stops import TrainingFailed

MAX_OOM_RETRIES = 4


@dataclass(frozen=True)
class BackOff:
    micro_tokens: int
    checkpointing: bool  # switch gradient checkpointing on
    event: TrainingEvent


def back_off(
    *, device: str, micro_tokens: int, row_tokens: int, message: str, retries: int
) -> BackOff:
    """The next try's micro-batch and checkpointing; raises TrainingFailed past the retries."""
    snapshot = memory_snapshot(device)
    if retries > MAX_OOM_RETRIES:
        raise TrainingFailed(
            said(
                "Out of memory on {device} even with micro-batches of {tokens} tokens and "
                "gradient checkpointing ({message}; RSS {rss} MB). Use a smaller base model, a "
                "lower max_seq_length or lora_r, or close other programs",
                device=device,
                tokens=micro_tokens,
                message=message,
                rss=snapshot.rss_mb,
            )
        )
    checkpointing = micro_tokens <= row_tokens  # nothing left to halve
    new_tokens = micro_tokens if checkpointing else max(row_tokens, micro_tokens // 2)
    change = (
        said("gradient checkpointing on")
        if checkpointing
        else said("micro-batch {old} → {new} tokens", old=micro_tokens, new=new_tokens)
    )
    event = TrainingEvent(
        "WARNING",
        said(
            "Out of memory ({message}); retrying the step with {change} (effective batch "
            "unchanged, retry {retry}/{retries})",
            message=message,
            change=change,
            retry=retries,
            retries=MAX_OOM_RETRIES,
        ),
        OutOfMemory(retry=retries, micro_batch_tokens=new_tokens, memory=snapshot),
    )
    return BackOff(new_tokens, checkpointing, event)
