"""A row's next token and the text it may show: sampling, end-of-turn ids, stop sequences."""

import time
from typing import Any

import torch

from app.ml.serving.requests import Sampling


def generator_for(sampling: Sampling, device: str) -> torch.Generator | None:
    """A sampling row's own random numbers: its seed's, or the clock's; none when greedy."""
    if sampling.temperature == 0:
        return None
    generator = torch.Generator(device=device)
    generator.manual_seed(sampling.seed if sampling.seed is not None else time.time_ns())
    return generator


def pick_token(logits: torch.Tensor, sampling: Sampling, generator: torch.Generator | None) -> int:
    """Greedy at temperature 0; otherwise sampled, within the top_p nucleus and among the
    tokens at least min_p times as likely as the likeliest."""
    if sampling.temperature == 0:
        return int(logits.argmax())
    probs = torch.softmax(logits.float() / sampling.temperature, dim=-1)
    if sampling.min_p > 0:
        probs = torch.where(probs >= sampling.min_p * probs.max(), probs, 0.0)
    if sampling.top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        outside = sorted_probs.cumsum(0) - sorted_probs > sampling.top_p
        sorted_probs[outside] = 0.0
        probs = torch.zeros_like(probs).scatter(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator))


def eos_ids(model: Any, tokenizer: Any) -> set[int]:
    """Every token that ends a turn: the tokenizer's and the generation config's."""
    ids = {tokenizer.eos_token_id}
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids.update(configured if isinstance(configured, list) else [configured])
    return {i for i in ids if i is not None}


def shown_text(text: str, sent: int, stops: tuple[str, ...], *, final: bool) -> tuple[str, bool]:
    """What of the decoded `text` is new (past `sent` characters) and safe to show, and
    whether a stop sequence ended it: never half a UTF-8 character, nor what may be the
    start of a stop sequence, nor the stop sequence itself."""
    end, stopped = len(text), False
    for stop in stops:
        at = text.find(stop, max(0, sent - len(stop)))
        if at != -1 and at < end:
            end, stopped = at, True
    if not stopped and not final:
        if text.endswith("\ufffd"):  # half a UTF-8 character: wait for the rest
            end = len(text.rstrip("\ufffd"))
        if stops:  # hold back what might be the start of a stop sequence
            end = min(end, len(text) - max(len(s) for s in stops) + 1)
    return text[sent : max(end, sent)], stopped
