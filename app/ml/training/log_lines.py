"""The run's longer log lines, as sentences read in each reader's language: how long it
trains, where each step stands, and what each epoch of an auto run learned."""

from app.core.language import Sentence, deferred, said
from app.ml.cpu_share import CpuShare
from app.ml.events import Progress
from app.ml.hyperparameters import ResolvedHyperparameters
from app.ml.training.until_learned import EpochReport, StartingAnswers, UntilLearned

# What a loop of another kind reports beside the loss, as its progress line says it.
FIGURES = {
    "reward_margin": deferred("reward margin {value:g}"),
    "reward_accuracy": deferred("reward accuracy {value:g}"),
    "reward_mean": deferred("reward mean {value:g}"),
    "reward_std": deferred("reward spread {value:g}"),
    "kl": deferred("KL {value:g}"),
}


def started(
    params: ResolvedHyperparameters, examples: int, steps: int, until_learned: UntilLearned | None
) -> Sentence:
    """How long the run trains: `until_learned` for auto epochs."""
    if until_learned is None:
        length = said("for {epochs} epochs, {steps} steps", epochs=params.epochs, steps=steps)
    else:
        longest = until_learned.max_steps
        length = said(
            "until every answer is learned, about {expected} epochs (at most {epochs} epochs, "
            "{steps} steps{raised})",
            expected=params.expected_epochs,
            epochs=params.epochs,
            steps=steps,
            raised=said(
                ", raised up to {longest} steps while answers are still being learned near it",
                longest=longest,
            )
            if longest > steps
            else "",
        )
    return said(
        "Training {examples} examples {length}, {batch} examples a step, lr {lr:g}",
        examples=examples,
        length=length,
        batch=params.batch_size,
        lr=params.learning_rate,
    )


def progress(
    report: Progress, figures: dict[str, float], *, loss: float, speed: float, eta: float
) -> Sentence:
    where = (
        said(
            "step {step}/{total} epoch {epoch:.2f}",
            step=report.step,
            total=report.total_steps,
            epoch=report.epoch,
        )
        if report.expected_epochs is None
        else said(
            "step {step} epoch {epoch:.2f} of about {expected:g}",
            step=report.step,
            epoch=report.epoch,
            expected=report.expected_epochs,
        )
    )
    shown = [said(FIGURES[name], value=value) for name, value in figures.items()]
    return said(
        "{where} loss {loss:.4f}{figures} {speed:,.0f} tok/s ETA {eta:.0f}s",
        where=where,
        loss=loss,
        figures=said(" {figures}", figures=shown) if shown else "",
        speed=speed,
        eta=eta,
    )


def device_chosen(device: str, reasons: list[Sentence], precision: str, why: Sentence) -> Sentence:
    return said(
        "Device {device}: {reasons}. Precision {precision}: {why}",
        device=device,
        reasons=reasons,
        precision=precision,
        why=why,
    )


def data_parallel(processes: int, backend: str, *, gpus: bool) -> Sentence:
    return said(
        "Data parallel: {processes} processes ({backend}), each on its own GPU with "
        "1/{processes} of every step's examples; gradients summed each step"
        if gpus
        else "Data parallel: {processes} processes ({backend}), each on its own share "
        "of the CPU with 1/{processes} of every step's examples; gradients summed "
        "each step",
        processes=processes,
        backend=backend,
    )


def resumed(step: int, total: int, losses: list[float]) -> Sentence:
    return said(
        "Resumed from the checkpoint of step {step}/{total} (loss so far {loss:.4f})",
        step=step,
        total=total,
        loss=sum(losses) / max(1, len(losses)),
    )


def cpu_share(share: CpuShare) -> Sentence:
    return said(
        "Training on {threads} of {cores} cores: other programs use {others:.1f}",
        threads=share.threads,
        cores=share.physical,
        others=share.others_cores,
    )


def cut(count: int, limit: int) -> Sentence:
    return said(
        "{cut} example(s) longer than max_seq_length={limit} were cut; raise max_seq_length to "
        "train on whole answers",
        cut=count,
        limit=limit,
    )


def epoch_end(
    report: EpochReport,
    watch: UntilLearned,
    *,
    kept: StartingAnswers | None,
    drilled: int,
    step: int,
    end: int,
    epochs_asked: int,
) -> Sentence:
    """An auto run's epoch: what it learned (as the steps saw it, and as written), what it
    trains again, what it kept of the model it started from, and any change to its course:
    a cut rate, a raised cap, the settling that ends it at `end`."""
    written = report.written
    parts = [
        said(
            "Epoch {epoch}: {learned}/{examples} training answers learned, {tokens:.1%} of "
            "their tokens",
            epoch=report.epoch,
            learned=report.learned,
            examples=report.examples,
            tokens=report.token_accuracy,
        )
    ]
    if written is not None:
        parts.append(
            said(
                "{written}/{examples} to the questions as written (the first count drops "
                "words from them)",
                written=written,
                examples=report.examples,
            )
        )
    if drilled == 1:
        parts.append(said("the one missed as written is trained again in the next epoch"))
    elif drilled:
        parts.append(
            said(
                "the {missed} missed as written are trained again in the next epoch", missed=drilled
            )
        )
    if kept is not None:
        parts.append(
            said(
                "{given}/{total} answers of the model it started from still given",
                given=kept.given,
                total=kept.total,
            )
        )
    if report.cut:
        parts.append(
            said(
                "no progress for {epochs} epochs, so the learning rate is cut to {scale:g}x",
                epochs=watch.patience,
                scale=watch.scale,
            )
        )
    if report.extended:
        parts.append(
            said(
                "answers are still being learned near the cap, so it is raised to "
                "{epochs:g} epochs ({steps} steps)",
                epochs=watch.cap_steps / watch.steps_per_epoch,
                steps=watch.cap_steps,
            )
        )
    if report.reason:
        parts.append(
            said(
                "{reason}, so the learning rate now settles to zero over {steps} steps and "
                "training ends at step {end} (the cap was {cap} epochs)",
                reason=report.reason,
                steps=end - step,
                end=end,
                cap=epochs_asked,
            )
        )
    return said("{parts}", parts=parts)
