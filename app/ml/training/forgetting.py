"""The forgetting meter in a run: what the model knew before its first step, and when
training ends what it still knows and which of its starting model's answers it still
gives, each said in the job's log (keeping.py asks and scores; this decides what is asked,
where it is kept between jobs and what is reported). The adapter's scope is fitted here
too: it is what keeps the base's general answers where the adapter would lose them."""

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core.language import said
from app.ml.data import Example
from app.ml.events import KnowledgeKept, Note, TrainingEvent
from app.ml.general_prompts import BROKEN_BELOW, KEEP_ANSWERS_AT_LEAST
from app.ml.pairs import QAPair
from app.ml.planner import TrainingPlan
from app.ml.scope import Scope, fit_scope
from app.ml.training.base_answers import answering_as
from app.ml.training.keeping import (
    Kept,
    Knowledge,
    kept_after,
    knowledge_file,
    read_knowledge,
    what_it_knows,
    write_knowledge,
)
from app.ml.training.loop import TrainingLoop
from app.ml.training.model_setup import TrainableModel
from app.ml.training.request import TrainingRequest


@dataclass(frozen=True)
class ForgettingMeter:
    request: TrainingRequest
    base_dir: Path
    tokenizer: Any
    emit: Callable[[TrainingEvent], None]

    def before(self, trainable: TrainableModel, plan: TrainingPlan) -> Knowledge:
        """The model's answers to qatune's general prompts before its first step: read
        from an earlier job on the same base where there was one (a new adapter starts as
        the base), else asked now and kept for the next."""
        params = plan.hyperparameters
        replay = bool(params.replay) and params.method != "reinforcement"
        kept = self._knowledge_file(trainable, plan)
        knowledge = read_knowledge(kept) if kept else None
        if knowledge is None or (replay and knowledge.replay is None):
            knowledge = what_it_knows(
                trainable.model,
                self.tokenizer,
                device=plan.memory.device,
                precision=plan.precision.precision,
                with_replay=replay,
            )
            if kept:
                write_knowledge(kept, knowledge)
        self.emit(
            TrainingEvent(
                "INFO",
                said(
                    "Before training, the model answers {known} of {asked} general questions "
                    "right: what it knows, to keep",
                    known=len(knowledge.known),
                    asked=knowledge.asked,
                )
                if knowledge.any
                else said(
                    "Before training, the model answers none of {asked} general questions "
                    "right: it knows nothing to keep",
                    asked=knowledge.asked,
                ),
                Note(topic="knowledge", values={"known": len(knowledge.known),
                                                "asked": knowledge.asked}),
            )
        )  # fmt: skip
        return knowledge

    def _knowledge_file(self, trainable: TrainableModel, plan: TrainingPlan) -> Path | None:
        """None where the answers are this run's own: a fine-tuned model trained further
        knows what its adapter taught it, and a run whose owner keeps no base answers."""
        directory = self.request.base_answers_dir
        if directory is None or self.request.start is not None:
            return None
        return knowledge_file(
            directory,
            self.base_dir,
            device=plan.memory.device,
            answering_as=answering_as(plan, trainable.quantized),
        )

    def scope(
        self, trainable: TrainableModel, plan: TrainingPlan, knowledge: Knowledge
    ) -> Scope | None:
        """The adapter's scope (scope.py), fitted on the weights the run keeps: where it is
        asked for, and by default where the base knew anything to keep."""
        params = plan.hyperparameters
        if params.scope == "false" or (params.scope == "auto" and not knowledge.any):
            return None
        questions = [pair.question for pair in (*self.request.pairs, *self.request.keep_pairs)]
        return fit_scope(
            trainable.model, self.tokenizer, questions, device=plan.memory.device, seed=params.seed
        )

    def after(
        self,
        trainable: TrainableModel,
        plan: TrainingPlan,
        knowledge: Knowledge,
        scope: Scope | None,
    ) -> Kept | None:
        """The general questions the model knew, and of those the ones it still answers
        right as served, its scope applied, and by the adapter alone (None when it knew
        none)."""
        kept = kept_after(
            trainable.model,
            self.tokenizer,
            knowledge,
            device=plan.memory.device,
            precision=plan.precision.precision,
            scope=scope,
        )
        if kept is None:
            return None
        if scope is not None:
            self.emit(
                TrainingEvent(
                    "INFO",
                    said(
                        "The adapter's scope leaves {outside} of the {known} general questions "
                        "the model knew to the base model; answering all of them, the adapter "
                        "alone would keep {alone}",
                        outside=kept.outside,
                        known=kept.known,
                        alone=kept.alone,
                    ),
                    Note(topic="scope", values={"outside": kept.outside, "alone": kept.alone}),
                )
            )
        self.emit(
            TrainingEvent(
                "INFO" if kept.share >= BROKEN_BELOW else "WARNING",
                said(
                    "After training it answers {kept} of the {known} general questions it "
                    "knew ({share:.0%})",
                    kept=kept.kept,
                    known=kept.known,
                    share=kept.share,
                ),
                KnowledgeKept(known=kept.known, kept=kept.kept),
            )
        )
        return kept

    def starting_answers(self, loop: TrainingLoop, keep: list[Example]) -> tuple[int, int] | None:
        """Of the answers the starting model was trained on, those it still gives exactly,
        and how many there were."""
        # Whole, whatever the job's own length: a reinforcement job's prompts are shorter
        if not keep:
            return None
        kept = loop.judging.exact_answers(keep)
        share = kept / len(keep)
        self.emit(
            TrainingEvent(
                "INFO" if share >= KEEP_ANSWERS_AT_LEAST else "WARNING",
                said(
                    "It still gives {kept} of the {total} answers the model it started from "
                    "was trained on ({share:.0%})",
                    kept=kept,
                    total=len(keep),
                    share=share,
                ),
                KnowledgeKept(known=len(keep), kept=kept, answers=True),
            )
        )
        return kept, len(keep)


def pairs_to_keep(request: TrainingRequest) -> list[QAPair]:
    """The pairs the model a job trains further was trained on, less those whose question
    the job's data asks again: their answers are what the job changes."""
    asked = {_prompt_key(pair) for pair in request.pairs}
    return [pair for pair in request.keep_pairs if _prompt_key(pair) not in asked]


def _prompt_key(pair: QAPair) -> str:
    """A pair's prompt (system, earlier turns, question), as one comparable string."""
    return json.dumps(pair.prompt_messages(), sort_keys=True, ensure_ascii=False)
