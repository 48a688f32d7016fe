"""Auto epochs never end worse than the best epoch they reached (best_weights.BestEpoch):
a real loop on the built-in model learns a small set, then its final weights lose answers,
and the run ends from the best epoch's weights instead, with the count of those."""

import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

from app.ml.data import Example, data_facts, encode_pairs
from app.ml.events import Learned, Note, TrainingEvent
from app.ml.hyperparameters import HyperparameterRequest, knowing
from app.ml.models import load_tokenizer, read_model_facts, resolve_model_dir
from app.ml.planner import plan_training
from app.ml.training.adapter_metadata import AdapterMetadata
from app.ml.training.best_weights import BestEpoch, EpochScore
from app.ml.training.checkpoints import (
    Checkpointer,
    LoopProgress,
    latest_checkpoint,
    load_checkpoint,
)
from app.ml.training.loop import TrainingLoop
from app.ml.training.model_setup import load_trainable_model
from tests.conftest import cpu_plan, training_pairs

pytestmark = pytest.mark.slow  # it trains


def auto_loop(
    model_cache: Path,
    events: list[TrainingEvent],
    cap_epochs: int | None = None,
    emit: Callable[[TrainingEvent], None] | None = None,
    **changes: Any,
) -> TrainingLoop:
    """A supervised loop with auto epochs over eight of qa30's pairs, as the trainer makes
    it; `cap_epochs`, a lower cap than auto's; `changes`, other resolved values; `emit`,
    where its events go instead of `events`."""
    model_dir = resolve_model_dir("builtin:tiny", cache_dir=model_cache, offline=True)
    tokenizer, facts = load_tokenizer(model_dir), read_model_facts(model_dir)
    examples, _ = encode_pairs(tokenizer, training_pairs()[:8], facts.shape.max_positions)
    device_plan = cpu_plan()
    precision = device_plan.precision_for("fp32")
    plan = plan_training(
        HyperparameterRequest(),
        data=data_facts(examples),
        shape=facts.shape,
        recommended=facts.recommended,
        device="cpu",
        precision=precision,
        budget_gb=device_plan.memory_budget_gb,
        budget_reason=device_plan.budget_reason.english(),
    )
    assert plan.hyperparameters.until_learned
    # The random model knows none of the general questions: the trainer's values for it
    params = knowing(plan.hyperparameters, HyperparameterRequest(), knows_anything=False)
    if cap_epochs:
        params = replace(params, epochs=cap_epochs)
    params = replace(params, **changes)
    torch.manual_seed(0)
    trainable = load_trainable_model(
        model_dir, device="cpu", precision="fp32", params=params, emit=emit or events.append
    )
    return TrainingLoop(
        trainable.model,
        tokenizer,
        examples,
        params=params,
        plan=plan.memory,
        device="cpu",
        precision=precision,
        flat=trainable.flat,
        emit=emit or events.append,
        should_stop=lambda: None,
    )


def finals(events: list[TrainingEvent]) -> list[Learned]:
    return [e.data for e in events if isinstance(e.data, Learned) and e.data.final]


def test_a_run_whose_end_lost_answers_ends_from_its_best_epoch(model_cache: Path) -> None:
    events: list[TrainingEvent] = []
    loop = auto_loop(model_cache, events)
    loop.run()
    (ended,) = finals(events)
    assert ended.learned == ended.examples == 8, "the small set is learned"
    assert loop.judging.best_epoch is not None and loop.judging.best_epoch.best is not None
    assert loop.judging.best_epoch.best.learned == 8

    # The end of a run loses answers (as settling can): the LoRA update pushed off course.
    with torch.no_grad():
        for name, param in loop.judging.best_epoch.trainable.items():
            if "lora_B" in name:
                param.add_(torch.randn_like(param) * param.abs().mean() * 3)
    assert loop.until_learned is not None
    loop.judging.finish_learned(loop.until_learned)

    kept = finals(events)[-1]
    assert kept.learned == 8, "the best epoch's weights put back, and counted"
    assert kept.kept_epoch == loop.judging.best_epoch.best.epoch
    assert loop.judging.learned_fraction == 1.0
    assert any(isinstance(e.data, Note) and e.data.topic == "kept" for e in events)
    assert loop.judging.kept_epoch == kept.kept_epoch and loop.judging.kept_why is not None
    assert "most training answers" in loop.judging.kept_why.text()


def test_a_run_still_learning_at_its_cap_trains_past_it(model_cache: Path) -> None:
    """Answers still being learned near the cap raise it: the loop trains on past the
    first cap, over the schedule's further epochs, and says so in its log."""
    events: list[TrainingEvent] = []
    loop = auto_loop(model_cache, events, cap_epochs=20)  # the set takes ~26 epochs
    cap = loop.total_steps
    assert loop.until_learned is not None and cap == 20 * loop.steps_per_epoch
    done = loop.run()
    raised = [e for e in events if "so it is raised to" in e.message.english()]
    assert raised, [e.message.english() for e in events if isinstance(e.data, Learned)]
    assert cap < done.step == loop.total_steps <= 2 * cap
    (ended,) = finals(events)
    assert ended.learned == ended.examples == 8, "learned whole past the first cap"


def test_with_question_noise_each_epoch_also_judges_the_questions_as_written(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steps see questions with words dropped; each epoch the log also says how many
    answers the weights as they are give to the questions as written, which the plateau,
    the raise and the best epoch judge by. Those the weights miss are drilled in the next
    epoch: trained again, as written, and not counted a second time. The `Learned` event
    carries both figures, as the job's metrics and page read them."""
    judged: list[tuple[int, int]] = []  # (the log's figure, the weights' own), each epoch
    drills: dict[int, list[Example]] = {}  # by epoch: the questions missed as written

    def emit(event: TrainingEvent) -> None:
        if not isinstance(event.data, Learned) or event.data.final:
            return
        missed = loop.judging.missed_answers(loop.examples)
        assert loop.judging.drill == missed, event.message.english()
        drilled = (
            "the one missed as written is trained again"
            if len(missed) == 1
            else f"the {len(missed)} missed as written are trained again"
        )
        assert (drilled in event.message.english()) == bool(missed), event.message.english()
        drills[event.data.epoch] = missed
        assert event.data.drilled == len(missed), "the event carries the drill the log says"
        said = re.search(r"(\d+)/\d+ to the questions as written", event.message.english())
        assert (event.data.written is None) == (said is None), event.message.english()
        if said:
            judged.append((int(said[1]), len(loop.examples) - len(missed)))
            assert event.data.written == int(said[1])

    loop = auto_loop(model_cache, [], emit=emit, question_noise=0.1)
    steps: list[list[Example]] = []
    trains = loop.optimizer_step

    def recorded(examples: list[Example]) -> tuple[float, int, int]:
        steps.append(examples)
        return trains(examples)

    monkeypatch.setattr(loop, "optimizer_step", recorded)
    loop.run()
    assert len(judged) >= 10
    assert all(figure == written for figure, written in judged), judged
    assert any(figure > 0 for figure, _ in judged), judged

    per_epoch = loop.steps_per_epoch
    drilled_epochs = 0
    for epoch, missed in drills.items():
        following = steps[epoch * per_epoch : (epoch + 1) * per_epoch]
        drilled = [e for step in following for e in step if e.drilled]
        if not missed or len(following) < per_epoch:
            assert not drilled, epoch
            continue
        drilled_epochs += 1
        assert drilled, f"epoch {epoch} missed {len(missed)}, none drilled after"
        as_written = {tuple(e.input_ids) for e in missed}
        assert all(tuple(e.input_ids) in as_written for e in drilled), epoch
        scheduled = [e for step in following for e in step if not e.drilled]
        assert len(scheduled) == len(loop.examples), "the drill comes on top of the epoch"
    assert drilled_epochs >= 3, drills


def test_each_step_drills_a_tenth_as_many_in_turn_and_a_checkpoint_keeps_the_drill(
    model_cache: Path, tmp_path: Path
) -> None:
    """Each step drills a tenth as many questions as it trains (one at least), going round
    those missed; a resumed run drills what the killed one would have."""
    loop = auto_loop(model_cache, [], question_noise=0.1)
    missed = loop.examples[2:6]
    loop.judging.drill = missed
    drilled = [e for step in range(len(missed)) for e in loop.judging.drilled(step)]
    assert all(e.drilled for e in drilled)
    assert sorted(e.input_ids for e in drilled) == sorted(e.input_ids for e in missed)
    assert loop.params.batch_size < 15, "one a step"
    loop.judging.drill = missed[:1]
    assert [e.input_ids for e in loop.judging.drilled(7)] == [missed[0].input_ids]
    loop.judging.drill = missed

    loop.checkpointer = Checkpointer(
        tmp_path, total_steps=10, metadata=AdapterMetadata(base_model="builtin:tiny")
    )
    loop._checkpoint(LoopProgress(step=6, losses=[1.0] * 6))
    resumed = auto_loop(model_cache, [], question_noise=0.1)
    checkpoint = latest_checkpoint(tmp_path)
    assert checkpoint is not None
    resumed.resume(checkpoint)
    assert resumed.judging.drill == missed
    assert [resumed.examples.index(e) for e in resumed.judging.drill] == [2, 3, 4, 5]


def test_the_best_epoch_survives_a_checkpoint(model_cache: Path, tmp_path: Path) -> None:
    """A resumed run still knows the best epoch the run before it reached."""
    events: list[TrainingEvent] = []
    loop = auto_loop(model_cache, events)
    assert loop.judging.best_epoch is not None
    score = EpochScore(epoch=3, step=6, learned=5, examples=8, loss=0.5)
    loop.judging.best_epoch.offer(score)
    kept_weights = {n: p.detach().clone() for n, p in loop.judging.best_epoch.trainable.items()}
    with torch.no_grad():
        for param in loop.judging.best_epoch.trainable.values():
            param.add_(1.0)
    checkpointer = Checkpointer(
        tmp_path, total_steps=10, metadata=AdapterMetadata(base_model="builtin:tiny")
    )
    saved = checkpointer.save(
        loop.model,
        loop.optimizer,
        loop.scheduler,
        None,
        LoopProgress(step=6, losses=[1.0] * 6),
        loop.judging.best_epoch,
    )

    resumed = BestEpoch(loop.model)
    load_checkpoint(saved.path, loop.model, loop.optimizer, loop.scheduler, None, kept=resumed)
    assert resumed.best == score
    resumed.swap()
    for name, param in resumed.trainable.items():
        assert torch.equal(param, kept_weights[name])


def test_more_answers_beat_fewer_and_ties_go_to_the_lower_loss() -> None:
    net = torch.nn.Linear(2, 2)
    best = BestEpoch(net)
    first = EpochScore(epoch=1, step=2, learned=3, examples=8, loss=0.9)
    assert best.offer(first)
    assert not best.offer(replace(first, epoch=2, learned=2, loss=0.1))
    assert not best.offer(replace(first, epoch=3, loss=0.95))
    assert best.offer(replace(first, epoch=4, loss=0.5))
    assert best.offer(replace(first, epoch=5, learned=4, loss=2.0))
    assert best.best is not None and best.best.epoch == 5


def test_a_copy_saved_again_is_written_in_place_and_put_back_whole() -> None:
    """WeightsCopy, as reinforcement keeps its last healthy step's weights every step: the
    second save reuses the first's tensors, and putting back restores the saved values."""
    from app.ml.training.best_weights import WeightsCopy

    trained, frozen = torch.nn.Linear(4, 4), torch.nn.Linear(4, 2)
    frozen.requires_grad_(False)  # a frozen layer is not copied
    copy = WeightsCopy(torch.nn.Sequential(trained, frozen))
    copy.save()
    first = dict(copy._saved)
    with torch.no_grad():
        trained.weight.add_(1.0)
    copy.save()
    assert set(copy._saved) == {"0.weight", "0.bias"}
    assert all(copy._saved[name] is first[name] for name in first)
    saved = trained.weight.detach().clone()
    with torch.no_grad():
        trained.weight.mul_(0.0)
    copy.put_back()
    assert torch.equal(trained.weight, saved)
