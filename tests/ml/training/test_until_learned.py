"""Auto epochs: count learned answers from the loss's own argmax, settle once learned."""

import torch

from app.ml.data import Example, collate_flat
from app.ml.training.until_learned import UntilLearned

EXAMPLES = [Example(input_ids=[1, 2, 3, 4 + i, 5 + i], prompt_len=3) for i in range(4)]


def hits_for(batch_targets: int, wrong: set[int]) -> torch.Tensor:
    """Every answer token right but those at `wrong` (positions in the batch's targets)."""
    hits = torch.ones(batch_targets, dtype=torch.bool)
    hits[list(wrong)] = False
    return hits


def test_an_answer_counts_only_when_every_token_is_right() -> None:
    batch = collate_flat(EXAMPLES)
    assert batch.answer_tokens == 8 and batch.targets.shape[0] >= 8  # padded to a bucket
    answered = batch.answered(hits_for(batch.targets.shape[0], {3}))  # example 1's 2nd token
    assert [right for _, right in answered] == [True, False, True, True]
    # Padding rows (IGNORE targets) never count against an answer.
    assert all(r for _, r in batch.answered(hits_for(batch.targets.shape[0], {8, 9})))


def test_the_rate_stays_flat_until_learned_then_settles_over_a_fifth() -> None:
    watch = UntilLearned(examples=4, steps_per_epoch=2, cap_steps=200, patience=3)
    assert watch.lr_factor(0) == watch.lr_factor(150) == 1.0  # the cap's last fifth decays
    assert watch.lr_factor(160) == 1.0 and watch.lr_factor(180) == 0.5 and watch.end_step == 200
    batch = collate_flat(EXAMPLES)
    watch.record(batch, hits_for(batch.targets.shape[0], {0}))
    report = watch.end_of_epoch(step=20)
    assert (report.learned, report.reason, report.settling_from) == (3, "", None)
    watch.record(batch, hits_for(batch.targets.shape[0], set()))
    report = watch.end_of_epoch(step=40)
    assert report.learned == 4 and report.reason == "every answer is learned"
    assert report.settling_from == 40 and watch.end_step == 48  # 40 + a fifth of 40
    assert watch.lr_factor(40) == 1.0 and watch.lr_factor(44) == 0.5 and watch.lr_factor(48) == 0


def test_no_progress_for_the_patience_settles_too() -> None:
    watch = UntilLearned(examples=4, steps_per_epoch=1, cap_steps=1000, patience=3)
    batch = collate_flat(EXAMPLES)
    reports = []
    for epoch in range(1, 6):
        watch.record(batch, hits_for(batch.targets.shape[0], {0, 2, 4, 6}))  # same every time
        reports.append(watch.end_of_epoch(step=epoch))
    assert [r.reason for r in reports[:3]] == ["", "", ""]
    assert reports[3].reason == "no more were learned for 3 epochs"
    assert watch.end_step == 5  # one epoch of settling at least
