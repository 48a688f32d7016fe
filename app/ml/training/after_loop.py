"""After the loop: the kept weights' answer table, and the figures it adds to the run's.

The table is decoded by the serving engine on the run's own weights (evaluation.py), on
its own thread, in the run's share of the CPU and with freed memory kept between steps,
as the loop's steps are.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from app.core.language import said
from app.ml.cpu_share import CpuShare, share_cpu_on_another_thread
from app.ml.events import Evaluated, Note, TrainingEvent
from app.ml.memory import heap_kept_between_steps
from app.ml.pairs import QAPair
from app.ml.planner import TrainingPlan
from app.ml.training.base_answers import BaseAnswers, answering_as
from app.ml.training.evaluation import Split, TableModel, answer_table, table_questions
from app.ml.training.loop import TrainingLoop
from app.ml.training.metrics import EvaluationReport, TrainingMetrics
from app.ml.training.model_setup import TrainableModel, adapter_back, serving_weights


@dataclass(frozen=True)
class TableRun:
    """Where the table's inputs are: the base model's files, the staged adapter, and the
    owner's kept base answers (None: none kept)."""

    model_dir: Path
    staging: Path
    base_model: str
    base_answers_dir: Path | None
    cpu_share: CpuShare | None


def evaluate_kept_weights(
    trainable: TrainableModel,
    tokenizer: Any,
    run: TableRun,
    asked: list[QAPair],
    *,
    validated: bool,
    plan: TrainingPlan,
    loop: TrainingLoop,
    metrics: TrainingMetrics,
    emit: Callable[[TrainingEvent], None],
) -> tuple[TrainingMetrics, EvaluationReport | None]:
    """The answer table of the kept weights (the run's model is used up by it), and the
    run's figures with the validation's added; no table for prompts alone (reinforcement
    records with no reference answer)."""
    asked = [pair for pair in asked if not pair.prompt_only]
    if not asked:
        emit(TrainingEvent("INFO", said("Answer table: none (prompts with no reference answer)")))
        return metrics, None
    started = time.perf_counter()
    split: Split = "validation" if validated else "training"
    questions = table_questions(asked, split)
    emit(_asking(len(questions), split))
    with heap_kept_between_steps():  # decode steps reuse freed pages, as training's do
        report = answer_table(
            _table_model(trainable, tokenizer, run, plan),
            questions,
            split=split,
            base_answers=_kept_base_answers(trainable, run, plan),
            between_steps=share_cpu_on_another_thread(run.cpu_share),
            kept_epoch=loop.judging.kept_epoch,
            kept_why=loop.judging.kept_why,
        )
    emit(_answered(report, time.perf_counter() - started))
    if loop.judging.kept is None:
        return metrics, report
    evaluated = Evaluated(
        eval_loss=loop.judging.kept.loss,
        eval_exact_match=report.exact_match,
        eval_examples=report.questions,
        base_exact_match=report.base_exact_match,
        kept_epoch=loop.judging.kept.epoch,
    )
    emit(_validated(evaluated, report))
    metrics = replace(
        metrics,
        eval_loss=evaluated.eval_loss,
        eval_exact_match=evaluated.eval_exact_match,
        eval_examples=evaluated.eval_examples,
    )
    return metrics, report


def _table_model(
    trainable: TrainableModel, tokenizer: Any, run: TableRun, plan: TrainingPlan
) -> TableModel:
    return TableModel(
        weights=partial(serving_weights, trainable),
        mergeable=False,  # the run's scope and what it kept are asked after the table
        afterwards=partial(adapter_back, trainable, run.staging),
        tokenizer=tokenizer,
        base_model=run.base_model,
        adapter_dir=run.staging,
        device=plan.memory.device,
        precision=plan.precision.precision,
        quantized=trainable.quantized,
    )


def _kept_base_answers(
    trainable: TrainableModel, run: TableRun, plan: TrainingPlan
) -> BaseAnswers | None:
    """The owner's base answers from earlier jobs on this base, as it decodes here."""
    if run.base_answers_dir is None:
        return None
    return BaseAnswers(
        run.base_answers_dir,
        run.model_dir,
        device=plan.memory.device,
        precision=answering_as(plan, trainable.quantized),
    )


def _asking(count: int, split: Split) -> TrainingEvent:
    return TrainingEvent(
        "INFO",
        said(
            "Answer table: asking {count} training questions, with the adapter and without it"
            if split == "training"
            else "Answer table: asking {count} validation questions, with the adapter and "
            "without it",
            count=count,
        ),
    )


def _answered(report: EvaluationReport, seconds: float) -> TrainingEvent:
    cut = (
        said("; {unfinished} cut short by the time limit", unfinished=report.unfinished)
        if report.unfinished
        else ""
    )
    return TrainingEvent(
        "INFO",
        said(
            "Answer table: {exact}/{questions} exact (the base model alone: {base:.0%}; "
            "{reused} base answers from earlier jobs) in {seconds:.1f} s{cut}",
            exact=round(report.exact_match * report.questions),
            questions=report.questions,
            base=report.base_exact_match,
            reused=report.base_reused,
            seconds=seconds,
            cut=cut,
        ),
        Note(
            topic="answer_table",
            values={
                "questions": report.questions,
                "seconds": round(seconds, 2),
                "base_reused": report.base_reused,
                "unfinished": report.unfinished,
            },
        ),
    )


def _validated(evaluated: Evaluated, report: EvaluationReport) -> TrainingEvent:
    return TrainingEvent(
        "INFO",
        said(
            "Validation: loss {loss:.4f}, exact match {exact}/{questions} (the base model "
            "alone: {base:.0%}); {kept}",
            loss=evaluated.eval_loss,
            exact=round(report.exact_match * report.questions),
            questions=report.questions,
            base=report.base_exact_match,
            kept=report.kept_why or report.kept_reason,
        ),
        evaluated,
    )
