"""Auto epochs: count learned answers from the loss's own argmax, settle once learned."""

from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from app.ml.data import Example, collate_flat
from app.ml.training.checkpoints import LoopProgress
from app.ml.training.until_learned import StartingAnswers, UntilLearned

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


def test_the_rate_decays_over_the_cap_until_learned_then_settles_over_a_fifth() -> None:
    watch = UntilLearned(
        examples=4, steps_per_epoch=2, cap_steps=200, patience=3, expected_epochs=24
    )
    assert watch.lr_factor(0) == 1.0 and watch.lr_factor(100) == 0.5  # as a fixed run would
    assert watch.lr_factor(200) == 0.0 and watch.end_step == 200
    batch = collate_flat(EXAMPLES)
    watch.record(batch, hits_for(batch.targets.shape[0], {0}))
    report = watch.end_of_epoch(step=20)
    assert (report.learned, report.reason, report.settling_from) == (3, None, None)
    watch.record(batch, hits_for(batch.targets.shape[0], set()))
    report = watch.end_of_epoch(step=40)
    assert report.learned == 4 and str(report.reason) == "every answer is learned"
    assert report.settling_from == 40 and watch.end_step == 48  # 40 + a fifth of 40
    # From where the decay had got to (0.8 at step 40), straight down to zero.
    assert watch.lr_factor(40) == 0.8 and watch.lr_factor(44) == 0.4 and watch.lr_factor(48) == 0


def test_a_model_trained_further_ends_once_its_starting_answers_are_back_too() -> None:
    watch = UntilLearned(
        examples=4, steps_per_epoch=1, cap_steps=1000, patience=3, expected_epochs=24
    )
    batch = collate_flat(EXAMPLES)
    reports = []
    for epoch, given in enumerate([3, 5, 5, 9, 10], start=1):  # of 10 answers it started with
        watch.record(batch, hits_for(batch.targets.shape[0], set()))  # its own: all learned
        assert watch.all_learned
        reports.append(watch.end_of_epoch(epoch, StartingAnswers(given, 10)))
    # More of them given counts as progress (no cut); it settles only once enough are.
    assert [r.reason is None for r in reports] == [True] * 4 + [False]
    assert not any(r.cut for r in reports)


def test_a_plateau_halves_the_rate_three_times_then_settles() -> None:
    watch = UntilLearned(
        examples=4, steps_per_epoch=1, cap_steps=1000, patience=3, expected_epochs=24
    )
    batch = collate_flat(EXAMPLES)
    reports = []
    for epoch in range(1, 15):
        watch.record(batch, hits_for(batch.targets.shape[0], {0, 2, 4, 6}))  # same every time
        reports.append(watch.end_of_epoch(step=epoch))
        if reports[-1].reason:
            break
    # Epoch 1 sets the best; every 3 epochs without progress cut the rate in half.
    assert [r.epoch for r in reports if r.cut] == [4, 7, 10]
    assert watch.scale == 0.125 and watch.lr_factor(11) == 0.125 * (1 - 11 / 1000)
    assert reports[-1].epoch == 13 and "no more were learned for 3 epochs" in str(
        reports[-1].reason
    )
    assert watch.end_step == 16  # a fifth of 13 steps rounds to 3: one epoch at least
    assert watch.lr_factor(16) == 0.0


def test_progress_on_a_plateau_resets_the_patience() -> None:
    watch = UntilLearned(
        examples=4, steps_per_epoch=1, cap_steps=1000, patience=3, expected_epochs=24
    )
    batch = collate_flat(EXAMPLES)
    wrong = [{0, 2, 4, 6}] * 4 + [{0, 2, 4}] + [{0, 2, 4}] * 3
    cuts = []
    for epoch, missed in enumerate(wrong, start=1):
        watch.record(batch, hits_for(batch.targets.shape[0], missed))
        cuts.append(watch.end_of_epoch(step=epoch).cut)
    # Cut at epoch 4; epoch 5 learned one more, so the next cut waits until epoch 8.
    assert cuts == [False, False, False, True, False, False, False, True]


def test_after_a_cut_a_climb_back_below_the_old_best_is_progress() -> None:
    """The best before a cut was reached at the higher rate: a run that fell from it and
    climbs back at the lower rate is progressing, and is not cut again while it climbs."""
    watch = UntilLearned(
        examples=4, steps_per_epoch=1, cap_steps=1000, patience=3, expected_epochs=24
    )
    batch = collate_flat(EXAMPLES)
    # 3 of 8 tokens wrong, then 4 (a fall: no progress, cut at epoch 4), then 3 wrong again
    # and 2: below the first epochs' best until epoch 8, but climbing from the cut's level
    wrong = [{0, 2, 4}] + [{0, 2, 4, 6}] * 3 + [{0, 2, 4}] * 3 + [{0, 2}] * 2
    cuts = []
    for epoch, missed in enumerate(wrong, start=1):
        watch.record(batch, hits_for(batch.targets.shape[0], missed))
        cuts.append(watch.end_of_epoch(step=epoch).cut)
    assert cuts == [False, False, False, True] + [False] * 5


def test_the_end_is_estimated_from_the_data_and_the_bar_never_goes_back() -> None:
    """Before its curve says more, an auto run is expected to take a typical set's epochs
    (not the cap); then the token error's fall decides; once it settles, the end is exact."""
    watch = UntilLearned(
        examples=4, steps_per_epoch=10, cap_steps=1000, patience=3, expected_epochs=24
    )
    typical = 24 * 10 + round(0.2 * 240)  # 24 epochs and their settling
    assert watch.expected_end_step(0) == typical
    shown = []

    def epoch(step: int, wrong_tokens: int, of: int) -> None:
        watch.hits, watch.targets = of - wrong_tokens, of
        watch.end_of_epoch(step)
        expected = watch.expected_end_step(step)
        shown.append(step / watch.shown_total(step, expected))

    epoch(10, 600, 1000)  # 60% of tokens wrong: early, the fall says little
    assert watch.expected_end_step(10) == typical
    epoch(20, 80, 1000)
    epoch(30, 20, 1000)
    epoch(40, 5, 1000)  # the error falls 4x an epoch: ~2 more epochs to 5e-4
    assert watch.expected_end_step(40) < typical
    for step in (50, 60, 70, 80):  # a plateau: back to the typical count
        epoch(step, 5, 1000)
    assert watch.expected_end_step(80) == typical
    assert shown == sorted(shown), "the share shown never falls"
    watch.answered = dict.fromkeys(range(4), True)
    watch.end_of_epoch(90)  # learned: it settles, and the end is known
    assert watch.expected_end_step(90) == watch.end_step == 90 + 18


def test_with_question_noise_more_answers_to_the_written_questions_are_progress() -> None:
    """With question noise the steps' count can stall while the weights answer more of the
    questions as written (200 look-alike pairs: 100-119 noisy, 177 as written): those are
    progress, so the rate is not cut while they rise; once they stall too, it is."""
    watch = UntilLearned(
        examples=4, steps_per_epoch=1, cap_steps=1000, patience=3, expected_epochs=24
    )
    batch = collate_flat(EXAMPLES)
    written = [0, 1, 1, 2, 2, 3, 3, 3, 3]  # the noisy count stays at 0 throughout
    cuts = []
    for epoch, given in enumerate(written, start=1):
        watch.record(batch, hits_for(batch.targets.shape[0], {0, 2, 4, 6}))
        report = watch.end_of_epoch(step=epoch, written=given)
        assert (report.learned, report.written) == (0, given)
        cuts.append(report.cut)
    assert cuts == [False] * 8 + [True]


def test_with_question_noise_it_settles_only_once_learned_with_the_noise() -> None:
    """Every written question answered is not enough: ended there, runs on the real model
    got fewer rewordings right (the staff FAQ: 41/60 against 51/60). It settles once the
    noisy count has every answer too (Judging then confirms them as written)."""
    watch = UntilLearned(
        examples=4, steps_per_epoch=1, cap_steps=1000, patience=20, expected_epochs=24
    )
    batch = collate_flat(EXAMPLES)
    watch.record(batch, hits_for(batch.targets.shape[0], {0, 2}))
    assert watch.end_of_epoch(step=1, written=4).reason is None
    watch.record(batch, hits_for(batch.targets.shape[0], set()))
    assert str(watch.end_of_epoch(step=2).reason) == "every answer is learned"


def through_a_checkpoint(watch: UntilLearned, step: int, tmp_path: Path) -> LoopProgress:
    """What `watch` keeps in a checkpoint at `step`, read back as one is (weights only)."""
    progress = LoopProgress(step=step)
    watch.keep_in(progress)
    torch.save({"progress": asdict(progress)}, tmp_path / "state.pt")
    return LoopProgress(**torch.load(tmp_path / "state.pt", weights_only=True)["progress"])


def test_a_resumed_run_estimates_and_shows_as_the_killed_one_would_have(tmp_path: Path) -> None:
    """Kept in a checkpoint (and read back as one is, weights only), the token errors, the
    share shown and the plateau's best make a resumed run expect the same end and never
    move the bar back; before, it forgot them and expected a typical set's epochs again."""

    def fresh() -> UntilLearned:
        return UntilLearned(
            examples=4, steps_per_epoch=10, cap_steps=1000, patience=3, expected_epochs=24
        )

    killed = fresh()
    for step, wrong in ((10, 600), (20, 80), (30, 20), (40, 5)):
        killed.hits, killed.targets = 1000 - wrong, 1000
        killed.end_of_epoch(step, written=step // 10 - 1)  # with question noise
        killed.shown_total(step, killed.expected_end_step(step))
    expected = killed.expected_end_step(40)
    assert expected < 24 * 10  # the curve says it ends well before a typical set's epochs
    resumed = fresh()
    resumed.resume(through_a_checkpoint(killed, 40, tmp_path))
    assert resumed.expected_end_step(40) == expected
    assert resumed.shown == killed.shown > 0
    assert (resumed.best_learned, resumed.best_accuracy, resumed.best_epoch) == (
        killed.best_learned,
        killed.best_accuracy,
        killed.best_epoch,
    )
    assert resumed.best_written == killed.best_written == 3
    assert fresh().expected_end_step(40) > expected  # what a run that forgot would expect


def capped_at_ten() -> UntilLearned:
    """An epoch a step, a cap of 10 that may be raised to 20, patience enough for no cut."""
    return UntilLearned(
        examples=4,
        steps_per_epoch=1,
        cap_steps=10,
        patience=20,
        expected_epochs=24,
        longest_steps=20,
    )


def test_a_run_still_learning_near_the_cap_gets_half_the_cap_more_up_to_twice() -> None:
    """A large set learns most of its answers as the rate falls towards the cap's end: a
    run that learns more answers than ever in the cap's last fifth gets half the cap again,
    the rate falling on from where it was, up to twice the cap."""
    watch = capped_at_ten()
    batch = collate_flat(EXAMPLES)
    # None learned for 7 epochs, then one more answer at epochs 8, 13 and 18
    wrong = [{0, 2, 4, 6}] * 7 + [{0, 2, 4}] * 5 + [{0, 2}] * 5 + [{0}] * 3
    reports = []
    for epoch, missed in enumerate(wrong, start=1):
        if epoch > watch.end_step:
            break
        before = watch.lr_factor(epoch)
        watch.record(batch, hits_for(batch.targets.shape[0], missed))
        reports.append(watch.end_of_epoch(step=epoch))
        assert watch.lr_factor(epoch) == pytest.approx(before), "the rate goes on from where it was"
        if epoch == 8:  # from where the first cap's decay had got to, to zero at 15
            assert watch.lr_factor(8) == pytest.approx(0.2) and watch.end_step == 15
            assert watch.lr_factor(13) == pytest.approx(0.2 * 2 / 7) and watch.lr_factor(15) == 0
    assert [r.epoch for r in reports if r.extended] == [8, 13]
    assert watch.cap_steps == watch.end_step == 20 and len(reports) == 20  # twice the cap
    assert watch.lr_factor(20) == 0.0
    assert not any(r.reason for r in reports), "the cap ends it, as before"


def test_a_run_learning_nothing_more_near_the_cap_ends_there() -> None:
    watch = capped_at_ten()
    batch = collate_flat(EXAMPLES)
    for epoch in range(1, 11):  # one answer learned from the first epoch, and no more
        watch.record(batch, hits_for(batch.targets.shape[0], {0, 2, 4}))
        assert not watch.end_of_epoch(step=epoch).extended
    assert watch.cap_steps == watch.end_step == 10


def test_a_raised_cap_survives_a_checkpoint(tmp_path: Path) -> None:
    killed = capped_at_ten()
    batch = collate_flat(EXAMPLES)
    for epoch, missed in enumerate([{0, 2, 4, 6}] * 7 + [{0, 2, 4}], start=1):
        killed.record(batch, hits_for(batch.targets.shape[0], missed))
        killed.end_of_epoch(step=epoch)
    assert killed.cap_steps == 15
    resumed = capped_at_ten()
    resumed.resume(through_a_checkpoint(killed, 8, tmp_path))
    assert resumed.end_step == 15 and resumed.max_steps == 20
    assert [resumed.lr_factor(s) for s in range(8, 16)] == [
        killed.lr_factor(s) for s in range(8, 16)
    ]
