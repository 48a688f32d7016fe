"""OpenAI's `method` object of a fine-tuning job: read from qatune's job, and a
reinforcement method's grader and hyperparameters in qatune's words."""

from typing import Any

from app.core.errors import BadRequest
from app.core.language import tr
from app.db.models import Job
from app.schemas.openai.fine_tuning import (
    DpoHyperparameters,
    DpoMethod,
    Hyperparameters,
    Method,
    ReinforcementHyperparameters,
    ReinforcementMethod,
    SupervisedMethod,
)


def method_of(job: Job, hyperparameters: Hyperparameters) -> Method:
    resolved, asked = job.resolved_hyperparameters, job.hyperparameters
    beta = resolved.beta if resolved and resolved.beta else asked.beta
    if job.method == "reinforcement" and job.grader is not None:
        group = resolved.group_size if resolved else asked.group_size
        interval = resolved.eval_interval if resolved else asked.eval_interval
        reinforcement = ReinforcementHyperparameters(
            **hyperparameters.model_dump(),
            compute_multiplier=ReinforcementHyperparameters.multiplier_of(group or "auto"),
            eval_interval=interval or "auto",
            eval_samples=resolved.eval_samples if resolved else asked.eval_samples,
            beta=beta,
        )
        method = ReinforcementMethod(grader=job.grader, hyperparameters=reinforcement)
        return Method(type="reinforcement", reinforcement=method)
    if job.method != "dpo":
        supervised = SupervisedMethod(hyperparameters=hyperparameters)
        return Method(type="supervised", supervised=supervised)
    dpo = DpoHyperparameters(**hyperparameters.model_dump(), beta=beta)
    return Method(type="dpo", dpo=DpoMethod(hyperparameters=dpo))


def reinforcement_asked(chosen: Method | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A reinforcement method's grader and its hyperparameters in qatune's words."""
    given = chosen.reinforcement if chosen else None
    if given is None:
        raise BadRequest(
            tr(
                "method reinforcement needs method.reinforcement.grader: the grader that scores "
                "each sampled answer"
            ),
            param="method.reinforcement.grader",
        )
    asked = given.hyperparameters
    if asked.reasoning_effort != "default":
        raise BadRequest(
            tr(
                "reasoning_effort {reasoning_effort!r}: no model served here reasons; leave it "
                "out (or 'default')",
                reasoning_effort=asked.reasoning_effort,
            ),
            param="method.reinforcement.hyperparameters.reasoning_effort",
        )
    hyperparameters = {
        "group_size": asked.group_size,
        "eval_interval": asked.eval_interval,
        "eval_samples": asked.eval_samples,
        "beta": asked.beta,
    }
    return {"grader": given.grader}, hyperparameters
