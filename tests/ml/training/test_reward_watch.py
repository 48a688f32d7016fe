"""A reinforcement run that cannot move, or that turns to noise, is told from its samples."""

from app.ml.training.reward_watch import RewardWatch, distinct_share

SPEAKS = [[1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 12, 13, 14, 15, 16]]  # every token distinct
NOISE = [[1, 2, 1, 2, 1, 2, 1, 2], [3, 3, 3, 3, 4, 4, 4, 4]]  # a quarter distinct


def test_the_distinct_share_is_each_answers_own_averaged() -> None:
    assert distinct_share(SPEAKS) == 1.0 and distinct_share(NOISE) == 0.25
    assert distinct_share([[], []]) is None


def test_an_epoch_of_answers_all_scoring_zero_ends_the_run() -> None:
    watch = RewardWatch(steps_per_epoch=4)
    for step in range(1, 4):
        assert watch.read(step, [0.0] * 16, SPEAKS, healthy_step=0) is None
    stop = watch.read(4, [0.0] * 16, SPEAKS, healthy_step=0)
    assert stop is not None and stop.kind == "flat" and stop.step == 4
    assert "64 answers sampled in 4 steps scored 0" in str(stop.reason)


def test_one_answer_that_scores_starts_the_count_again() -> None:
    watch = RewardWatch(steps_per_epoch=1)  # three steps at least, however short the epoch
    rewards = [[0.0] * 8, [0.0] * 8, [0.0] * 7 + [1.0], [0.0] * 8, [0.0] * 8]
    assert all(watch.read(i, r, SPEAKS, None) is None for i, r in enumerate(rewards, start=1))
    assert watch.read(6, [0.0] * 8, SPEAKS, None) is not None


def test_answers_turned_to_noise_two_steps_in_a_row_end_it_at_the_last_healthy_step() -> None:
    watch = RewardWatch(steps_per_epoch=2)
    assert watch.healthy(SPEAKS) and watch.read(1, [0.5, 1.0], SPEAKS, healthy_step=0) is None
    assert not watch.healthy(NOISE)
    assert watch.read(2, [1.0, 1.0], NOISE, healthy_step=0) is None  # one step: noise
    assert watch.read(3, [1.0, 1.0], SPEAKS, healthy_step=2) is None  # and it recovers
    assert watch.read(4, [1.0, 1.0], NOISE, healthy_step=2) is None
    stop = watch.read(5, [1.0, 1.0], NOISE, healthy_step=2)
    assert stop is not None and (stop.kind, stop.step, stop.healthy_step) == ("collapse", 5, 2)
    assert "25% of their tokens distinct, 100% at the start" in str(stop.reason)
