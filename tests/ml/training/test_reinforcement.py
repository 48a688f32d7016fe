"""Reinforcement fine-tuning (GRPO) on the built-in model: a grader's reward raises a
half-trained model's exact answers, a python grader drives a run, and a paused run
resumes where an uninterrupted one ends."""

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from app.graders.sandbox.runner import SandboxLimits
from app.graders.spec import Python, StringCheck
from app.jobs.metrics import JobMetrics
from app.ml.events import Progress, RewardEvaluated, TrainingEvent
from app.ml.hyperparameters import HyperparameterRequest
from app.ml.pairs import QAPair
from app.ml.training.adapter_files import read_evaluation
from app.ml.training.checkpoints import latest_checkpoint
from app.ml.training.request import StartAdapter, TrainingRequest
from app.ml.training.stops import TrainingFailed, TrainingPaused
from app.ml.training.trainer import ModelTrainer, TrainingResult
from tests.conftest import ROOT, cpu_plan

pytestmark = pytest.mark.slow  # every test trains

# 20 support questions whose answers are one of four: a half-trained model knows the
# answers but not yet which goes where (its wrong ones are near misses, "Busssss.").
FAQ = [
    QAPair(r["question"], r["answer"])
    for r in map(json.loads, (ROOT / "tests/data/faq_short.jsonl").read_text().splitlines())
]
EXACT = StringCheck(
    type="string_check",
    name="exact",
    input="{{ sample.output_text }}",
    reference="{{ item.answer }}",
    operation="eq",
)


def request(tmp_path: Path, name: str, model_cache: Path, **extra: Any) -> TrainingRequest:
    asked = extra.pop("hyperparameters", {})
    return TrainingRequest(
        base_model="builtin:tiny",
        pairs=FAQ,
        output_dir=tmp_path / name / "adapter",
        model_cache_dir=model_cache,
        hyperparameters=HyperparameterRequest.model_validate(asked),
        # fp32 on every CPU: where bf16 is native the plan trains in it, and 16 epochs of
        # sampling diverge with the precision (15 of 20 there against 17 in fp32)
        device_plan=dataclasses.replace(cpu_plan(), precision="fp32"),
        offline=True,
        **extra,
    )


@pytest.fixture(scope="module")
def half_trained(tmp_path_factory: pytest.TempPathFactory, model_cache: Path) -> TrainingResult:
    """A supervised job stopped early: about half its answers exactly right."""
    tmp = tmp_path_factory.mktemp("sft")
    return ModelTrainer(request(tmp, "sft", model_cache, hyperparameters={"max_steps": 11})).run()


def exact_answers(result: TrainingResult) -> float:
    evaluation = read_evaluation(result.adapter_dir)
    assert evaluation is not None and evaluation.questions == len(FAQ)
    return evaluation.exact_match


def test_a_grader_raises_a_half_trained_models_exact_answers_past_80_percent(
    tmp_path: Path, model_cache: Path, half_trained: TrainingResult
) -> None:
    before = exact_answers(half_trained)
    assert 0.35 <= before <= 0.65, before  # about half

    events: list[TrainingEvent] = []
    tuned = ModelTrainer(
        request(
            tmp_path,
            "rft",
            model_cache,
            start=StartAdapter(half_trained.adapter_dir, "sft"),
            grader=EXACT,
            hyperparameters={"epochs": 16, "group_size": 16},
            # One core: the suite runs two tests at once; the same 17 of 20 as on two
            cpu_threads=1,
        ),
        on_event=events.append,
    ).run()
    after = exact_answers(tuned)
    assert after >= 0.8, (before, after)
    progress = [e.data for e in events if isinstance(e.data, Progress)]
    assert len(progress) == tuned.metrics.train_steps  # every step's reward is reported
    rewards = [p.reward_mean or 0.0 for p in progress]
    assert all(0 <= r <= 1 for r in rewards)
    assert all(p.kl is not None and p.kl >= 0 and p.reward_std is not None for p in progress)
    first, last = rewards[:3], rewards[-3:]
    assert sum(last) / 3 > sum(first) / 3
    assert tuned.hyperparameters.method == "reinforcement"
    assert tuned.hyperparameters.group_size == 16 and tuned.hyperparameters.beta == 0.04


def test_a_python_grader_drives_a_run_and_validation_prompts_are_scored(
    tmp_path: Path, model_cache: Path, half_trained: TrainingResult
) -> None:
    starts_right = Python(
        type="python",
        name="first_letter",
        source=(
            "def grade(sample, item):\n"
            "    text, answer = sample['output_text'], item['answer']\n"
            "    return 1.0 if text[:1] == answer[:1] else 0.0\n"
        ),
    )
    events: list[TrainingEvent] = []
    result = ModelTrainer(
        request(
            tmp_path,
            "python",
            model_cache,
            start=StartAdapter(half_trained.adapter_dir, "sft"),
            grader=starts_right,
            python_graders=SandboxLimits(),
            hyperparameters={"max_steps": 2, "group_size": 4, "validation_split": 0.2},
        ),
        on_event=events.append,
    ).run()
    assert result.metrics.train_steps == 2
    progress = [e.data for e in events if isinstance(e.data, Progress)]
    assert any(p.reward_mean for p in progress)  # the grader scored answers, in its sandbox
    scored = [e.data for e in events if isinstance(e.data, RewardEvaluated)]
    assert scored and scored[-1].prompts == 4 and 0 <= scored[-1].reward_mean <= 1

    # With python graders off, a run has no sandbox: the job fails, saying why.
    with pytest.raises(TrainingFailed, match="python graders are off"):
        ModelTrainer(
            request(
                tmp_path,
                "off",
                model_cache,
                grader=starts_right,
                hyperparameters={"max_steps": 1, "group_size": 2},
            )
        ).run()


def test_a_grader_nothing_pleases_ends_the_run_after_an_epoch_and_the_job_says_why(
    tmp_path: Path, model_cache: Path
) -> None:
    never = EXACT.model_copy(update={"reference": "{{ item.answer }} (never said)"})
    events: list[TrainingEvent] = []
    result = ModelTrainer(
        request(
            tmp_path,
            "flat",
            model_cache,
            grader=never,
            hyperparameters={"group_size": 2, "batch_size": 8},
        ),  # fmt: skip
        on_event=events.append,
    ).run()
    # 20 prompts, 8 a step: an epoch is 3 steps (16, 16 and 8 answers) of the 12 asked for
    # (4 epochs), and it ends there
    assert result.metrics.train_steps == 3
    assert (result.metrics.reward_stop, result.metrics.reward_stop_step) == ("flat", 3)
    warned = [str(e.message) for e in events if e.level == "WARNING"]
    assert any("Reinforcement ends at step 3: every one of the 40 answers" in w for w in warned)
    outcome = JobMetrics.model_validate(result.metrics.as_dict()).outcome()
    assert outcome is not None and not outcome.target_met
    assert "every sampled answer scored 0" in outcome.summary


def test_a_paused_run_resumes_where_an_uninterrupted_one_ends(
    tmp_path: Path, model_cache: Path, half_trained: TrainingResult
) -> None:
    def run(name: str, **extra: Any) -> TrainingResult:
        return ModelTrainer(
            request(
                tmp_path,
                name,
                model_cache,
                start=StartAdapter(half_trained.adapter_dir, "sft"),
                grader=EXACT,
                checkpoint_dir=tmp_path / name / "checkpoints",
                hyperparameters={"max_steps": 4, "group_size": 4, "seed": 5},
                cpu_threads=1,  # the same sums in the same order: the same samples
            ),
            **extra,
        ).run()

    whole = run("whole")
    asked = {"n": 0}

    def pause_in_step_three() -> Any:
        asked["n"] += 1
        return "pause" if asked["n"] > 6 else None  # twice a step, and once a micro-batch

    with pytest.raises(TrainingPaused) as paused:
        run("paused", should_stop=pause_in_step_three)
    assert 0 < paused.value.step < 4
    saved = latest_checkpoint(tmp_path / "paused" / "checkpoints")
    assert saved is not None
    resumed = ModelTrainer(
        request(
            tmp_path,
            "paused",
            model_cache,
            start=StartAdapter(half_trained.adapter_dir, "sft"),
            grader=EXACT,
            checkpoint_dir=tmp_path / "paused" / "checkpoints",
            resume_from=saved,
            hyperparameters={"max_steps": 4, "group_size": 4, "seed": 5},
            cpu_threads=1,
        )
    ).run()
    # The samples of each step are seeded by the step: the same answers, the same update.
    want = load_file(whole.adapter_dir / "adapter_model.safetensors")
    got = load_file(resumed.adapter_dir / "adapter_model.safetensors")
    for name in want:
        assert torch.allclose(want[name], got[name], atol=1e-4), name
