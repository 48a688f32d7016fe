"""How the training loop scores answers, and what it decides from the scores.

The loop (loop.py) steps the optimizer and holds a `Judging`, which owns what it judges
with: the answer loss of a micro-batch (and which answer tokens the model already gets
right), the validation score of each epoch and the best weights kept, which training
answers are learned (auto epochs), the forgetting meter's epoch reading and the time
limit. It owns the run's length too (`total_steps`): every decision that ends a run
earlier is one of its. Each decision is reported as an event.
"""

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from app.core.language import Sentence, said
from app.ml.answer_loss import answer_loss_sum
from app.ml.data import Batch, Example, micro_batches
from app.ml.device import PrecisionDecision
from app.ml.events import KnowledgeKept, Learned, Note, TrainingEvent, Validated
from app.ml.hyperparameters import ResolvedHyperparameters
from app.ml.precision import autocast_for
from app.ml.training import log_lines
from app.ml.training.best_weights import BestEpoch, BestWeights, EpochScore, ValidationScore
from app.ml.training.progress import LoopProgress
from app.ml.training.schedule import cycled
from app.ml.training.until_learned import StartingAnswers, UntilLearned

SETTLE_AT_TIME = 0.85  # of the time limit: auto epochs let the learning rate settle after
DRILL_SHARE = 0.1  # of a step's examples: the questions missed as written beside them


@dataclass
class MicroBatching:
    """How a step's examples are cut into packed micro-batches; `micro_tokens` shrinks
    when the loop backs off from running out of memory, for its scoring as well."""

    row_tokens: int
    micro_tokens: int
    pad_id: int
    flat: bool

    def __call__(self, examples: list[Example]) -> list[Batch]:
        return micro_batches(
            examples,
            row_tokens=self.row_tokens,
            micro_batch_tokens=self.micro_tokens,
            pad_id=self.pad_id,
            flat=self.flat,
        )


@dataclass(eq=False)
class Judging:
    model: Any
    examples: list[Example]
    params: ResolvedHyperparameters
    device: str
    precision: PrecisionDecision
    micro_batches: MicroBatching
    steps_per_epoch: int
    total_steps: int  # where the run ends: decisions below bring it in (or raise it)
    longest_steps: int  # auto epochs: as far as a run still learning may go
    validation: list[Example]
    emit: Callable[[TrainingEvent], None]
    drills: bool = True  # whether the loop's loss trains the questions missed again (loop.py)
    # The answers the model this job trains further was trained on, and the general
    # questions it knew with its answers (set by the trainer)
    keep: list[Example] = field(default_factory=list)
    meter: list[Example] = field(default_factory=list)
    kept_why: Sentence | None = None  # which weights the run ends with, and why
    kept_epoch: float | None = None  # None: the final ones
    learned_fraction: float | None = None
    # Question noise: the questions the weights gave a wrong answer to as written at the
    # last epoch's end, trained again, as written, beside the next epoch's steps
    drill: list[Example] = field(default_factory=list)
    best: BestWeights | None = field(init=False)
    # Auto epochs without validation: the epoch with the most answers learned
    best_epoch: BestEpoch | None = field(init=False)
    until_learned: UntilLearned | None = field(init=False)

    def __post_init__(self) -> None:
        params, validation = self.params, self.validation
        self.best = BestWeights(self.model) if validation else None
        self.best_epoch = BestEpoch(self.model) if params.until_learned and not validation else None
        self.until_learned = None
        if params.until_learned:
            self.until_learned = UntilLearned(
                len(self.examples),
                self.steps_per_epoch,
                self.total_steps,
                patience=params.epochs // 10,
                expected_epochs=params.expected_epochs,
                longest_steps=self.longest_steps,
            )

    def hits_for(self, batch: Batch) -> torch.Tensor:
        """Room for whether each answer token was the model's most likely one."""
        return torch.empty(batch.targets.shape[0], dtype=torch.bool, device=self.device)

    def score(self, batch: Batch, hits: torch.Tensor | None) -> torch.Tensor:
        """The batch's summed answer loss; `hits`, if given, filled in (at no cost: the
        fused loss has the argmax at hand)."""
        with autocast_for(self.device, self.precision.precision):
            return answer_loss_sum(self.model, batch, hits)

    def learning_loss(self, batch: Batch) -> torch.Tensor:
        """The summed answer loss; with auto epochs, which answers are learned is recorded."""
        if self.until_learned is None:
            return self.score(batch, None)
        hits = self.hits_for(batch)
        loss = self.score(batch, hits)
        self.until_learned.record(batch, hits.cpu())
        return loss

    def exact_answers(self, examples: list[Example]) -> int:
        """How many of the examples' answers greedy decoding gives word for word."""
        return len(examples) - len(self.missed_answers(examples))

    def missed_answers(self, examples: list[Example]) -> list[Example]:
        """The examples whose answer greedy decoding does not give word for word: some
        answer token not the most likely one (teacher-forced, one forward, no decoding)."""
        self.model.eval()
        missed = []
        with torch.no_grad():
            for batch in self.micro_batches(examples):
                hits = self.hits_for(batch)
                self.score(batch.to(self.device), hits)
                missed += [e for e, correct in batch.answered(hits.cpu()) if not correct]
        self.model.train()
        return missed

    def drilled(self, step: int) -> list[Example]:
        """Beside each step's examples, a tenth as many of the questions missed as written
        (one at least), going round them: a question missed alone is trained in every step
        until it is answered. Not more: early on nearly every question is missed, and the
        set twice over an epoch would halve the noise's share of the training."""
        per_step = max(1, round(DRILL_SHARE * self.params.batch_size))
        return [replace(e, drilled=True) for e in cycled(self.drill, per_step, step)]

    def keep_in(self, progress: LoopProgress) -> None:
        """Into a checkpoint: the drill, by the examples' places in the set."""
        place = {id(e): i for i, e in enumerate(self.examples)}
        progress.drill = [place[id(e)] for e in self.drill]

    def resume(self, progress: LoopProgress) -> None:
        self.drill = [self.examples[i] for i in progress.drill]

    def measure_knowledge(self, step: int) -> None:
        """The forgetting meter's reading this epoch: the share of the tokens of its own
        earlier answers to the general questions it knew that the model still predicts."""
        if not self.meter:
            return
        self.model.eval()
        right = total = 0
        with torch.no_grad():
            for batch in self.micro_batches(self.meter):
                hits = self.hits_for(batch)
                self.score(batch.to(self.device), hits)
                right += int(hits[: batch.answer_tokens].sum())
                total += batch.answer_tokens
        self.model.train()
        agreement = round(right / max(1, total), 4)
        epoch = round(step / self.steps_per_epoch, 3)
        self.emit(
            TrainingEvent(
                "INFO",
                said(
                    "Epoch {epoch:g}: it still gives {share:.0%} of its own answers to the "
                    "general questions it knew",
                    epoch=epoch,
                    share=agreement,
                ),
                KnowledgeKept(known=len(self.meter), agreement=agreement, epoch=epoch),
            )
        )

    def validate(self, step: int) -> None:
        """Score the weights on the validation examples; the best are kept (best_weights)."""
        if self.best is None:
            return
        self.model.eval()
        exact, loss_sum, tokens = 0, 0.0, 0
        with torch.no_grad():
            for batch in self.micro_batches(self.validation):
                hits = self.hits_for(batch)
                loss_sum += self.score(batch.to(self.device), hits).item()
                exact += sum(right for _, right in batch.answered(hits.cpu()))
                tokens += batch.answer_tokens
        self.model.train()
        score = ValidationScore(
            epoch=round(step / self.steps_per_epoch, 3),
            step=step,
            exact=exact,
            examples=len(self.validation),
            loss=round(loss_sum / max(1, tokens), 5),
        )
        best = self.best.offer(score)
        self.emit(
            TrainingEvent(
                "INFO",
                said(
                    "Validation at epoch {epoch:g}: {exact}/{examples} answers exact, loss "
                    "{loss:.4f}{best}",
                    epoch=score.epoch,
                    exact=exact,
                    examples=score.examples,
                    loss=score.loss,
                    best=said(" (best so far: kept)") if best else "",
                ),
                Validated(**vars(score), best=best),
            )
        )

    def keep_best(self, step: int) -> None:
        """Score the final weights, and put the best validation's back if they were better."""
        if self.best is None:
            return
        if self.best.latest is None or self.best.latest.step != step:
            self.validate(step)
        final = self.best.latest
        kept = self.best.restore()
        assert final is not None
        if kept is None:
            self.kept_epoch = final.epoch
            self.kept_why = said(
                "kept the final weights (epoch {epoch:g}): no earlier epoch did better on "
                "validation ({exact}/{examples} exact)",
                epoch=final.epoch,
                exact=final.exact,
                examples=final.examples,
            )
            return
        self.kept_earlier(
            kept.epoch,
            kept.step,
            said(
                "the best on validation: {exact}/{examples} exact, against {final} at the end",
                exact=kept.exact,
                examples=kept.examples,
                final=final.exact,
            ),
        )

    def kept_earlier(self, epoch: float, step: int, why: Sentence) -> None:
        """The run ends from an earlier epoch's weights: recorded, and said in the log."""
        self.kept_epoch = epoch
        self.kept_why = said(
            "kept the weights of epoch {epoch:g} (step {step}), {why}",
            epoch=epoch,
            step=step,
            why=why,
        )
        self.emit(
            TrainingEvent(
                "INFO",
                said(
                    "Kept the weights of epoch {epoch:g} (step {step}), {why}",
                    epoch=epoch,
                    step=step,
                    why=why,
                ),
                Note(topic="kept", values={"epoch": epoch, "step": step}),
            )
        )

    @property
    def kept(self) -> ValidationScore | None:
        """The validation score of the weights the run ends with."""
        return self.best.best if self.best else None

    @property
    def kept_copy(self) -> BestWeights | BestEpoch | None:
        return self.best or self.best_epoch

    def expected_end(self, step: int) -> int:
        """The step training is expected to end at: auto epochs' estimate (until_learned.py)."""
        if self.until_learned is None:
            return self.total_steps
        return min(self.total_steps, self.until_learned.expected_end_step(step))

    def watch_time(self, limit: float, progress: LoopProgress) -> None:
        """Near the time limit auto epochs settle; at it, training ends."""
        seconds_per_step = progress.seconds / max(1, progress.step)
        watch = self.until_learned
        if watch and progress.seconds >= SETTLE_AT_TIME * limit:
            steps = int((limit - progress.seconds) / seconds_per_step)
            if watch.settle_now(progress.step, steps):
                self.total_steps = min(self.total_steps, watch.end_step)
                self.emit(
                    TrainingEvent(
                        "INFO",
                        said(
                            "Near the time limit ({minutes:g} min): the learning rate settles "
                            "to zero over {steps} steps",
                            minutes=limit / 60,
                            steps=self.total_steps - progress.step,
                        ),
                    )
                )
        if progress.seconds >= limit and progress.step < self.total_steps:
            self.emit(
                TrainingEvent(
                    "WARNING",
                    said(
                        "Time limit of {minutes:g} min reached at step {step} of {total}: "
                        "training ends here",
                        minutes=limit / 60,
                        step=progress.step,
                        total=self.total_steps,
                    ),
                    Note(topic="time_limit", values={"step": progress.step}),
                )
            )
            self.total_steps = progress.step

    def _count_learned(self, watch: UntilLearned, epoch: int) -> EpochScore:
        """How many training answers the weights as they are get exactly, in one forward
        pass in eval mode (dropout off, as when it answers): the epochs' counts were taken
        as the weights still moved."""
        watch.answered.clear()
        watch.hits = watch.targets = 0
        loss_sum, tokens = 0.0, 0
        self.model.eval()
        with torch.no_grad():
            for start in range(0, len(self.examples), self.params.batch_size):
                for batch in self.micro_batches(
                    self.examples[start : start + self.params.batch_size]
                ):
                    loss_sum += self.learning_loss(batch.to(self.device)).item()
                    tokens += batch.answer_tokens
        self.model.train()
        watch.recorded.clear()  # every rank counted them all: nothing of it to merge
        return EpochScore(
            epoch=epoch,
            step=epoch * self.steps_per_epoch,
            learned=sum(watch.answered.values()),
            examples=len(self.examples),
            loss=round(loss_sum / max(1, tokens), 5),
        )

    def finish_learned(self, watch: UntilLearned) -> None:
        """The trained model's own count, which the job reports; if an earlier epoch had
        more answers learned and is confirmed better, the run ends from its weights."""
        final = self._count_learned(watch, self.total_steps // self.steps_per_epoch)
        ending, accuracy = final, watch.hits / max(1, watch.targets)
        best = self.best_epoch.best if self.best_epoch else None
        if self.best_epoch and best and best.learned > final.learned:
            self.best_epoch.swap()
            earlier = self._count_learned(watch, best.epoch)
            if earlier.beats(final):
                ending, accuracy = earlier, watch.hits / max(1, watch.targets)
                self.kept_earlier(
                    best.epoch,
                    best.step,
                    said(
                        "the most training answers learned: {learned}/{examples}, against "
                        "{final} at the end",
                        learned=earlier.learned,
                        examples=earlier.examples,
                        final=final.learned,
                    ),
                )
            else:
                self.best_epoch.swap()  # the final weights were no worse after all
        self.learned_fraction = round(ending.learned / ending.examples, 4)
        self.emit(
            TrainingEvent(
                "INFO",
                said(
                    "The trained model answers {learned}/{examples} training questions exactly "
                    "(greedy)",
                    learned=ending.learned,
                    examples=ending.examples,
                ),
                Learned(
                    epoch=ending.epoch,
                    learned=ending.learned,
                    examples=ending.examples,
                    token_accuracy=round(accuracy, 4),
                    settling=True,
                    final=True,
                    kept_epoch=self.kept_epoch,
                ),
            )
        )

    def end_of_epoch(self, watch: UntilLearned, progress: LoopProgress) -> None:
        written, missed = None, []
        if watch.all_learned and not watch.settled_early:
            # Learned as the epoch's steps saw them, the weights moving under them and the
            # questions noised: it settles only once the weights as they are give every
            # answer to the question as written, as it will answer (one forward, eval mode)
            self._count_learned(watch, progress.step // self.steps_per_epoch)
            missed = [e for e in self.examples if not watch.answered.get(id(e))]
        elif self.params.question_noise:
            # The noisy count lags far behind on look-alike questions: what the weights
            # answer as written is judged too (one forward, eval mode)
            missed = self.missed_answers(self.examples)
            written = len(self.examples) - len(missed)
        if self.drills and self.params.question_noise:
            # Most of those still wrong are given a look-alike's answer: the next epoch
            # trains them again, as written
            self.drill = missed
        # Once its own answers are learned, a job that trains a model further checks that
        # model's answers too (one forward): it ends when enough of them are given as well
        kept = None
        if self.keep and watch.all_learned and not watch.settled_early:
            kept = StartingAnswers(self.exact_answers(self.keep), len(self.keep))
        report = watch.end_of_epoch(progress.step, kept, written)
        self.learned_fraction = round(report.learned / report.examples, 4)
        if self.best_epoch:
            losses = progress.losses[-self.steps_per_epoch :]
            score = EpochScore(
                epoch=report.epoch,
                step=progress.step,
                learned=report.learned if written is None else written,
                examples=report.examples,
                loss=sum(losses) / max(1, len(losses)),
            )
            self.best_epoch.offer(score)
        if report.extended or report.reason:
            self.total_steps = watch.end_step
        line = log_lines.epoch_end(
            report,
            watch,
            kept=kept,
            drilled=len(self.drill),
            step=progress.step,
            end=self.total_steps,
            epochs_asked=self.params.epochs,
        )
        self.emit(
            TrainingEvent(
                "INFO",
                line,
                Learned(
                    epoch=report.epoch,
                    learned=report.learned,
                    examples=report.examples,
                    token_accuracy=report.token_accuracy,
                    settling=report.settling_from is not None,
                    written=written,
                    drilled=len(self.drill),
                ),
            )
        )
