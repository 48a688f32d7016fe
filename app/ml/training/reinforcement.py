"""Reinforcement fine-tuning: GRPO (Shao et al. 2024) on the supervised loop's machinery.

Each step takes `batch_size` prompts and samples `group_size` answers to each from the
policy as it is now (policy_samples.py: every row of the step decoded together by the
serving engine), scores them with the job's grader (rewards.py), and moves the policy
towards the answers that scored above their group's mean. Per answer the advantage is
(r − mean) / (std + ε) of its group; per token the loss is −(A·ρ − β·KL), where ρ is the
importance ratio (1 in value: one update per sampling, as TRL's default num_iterations=1,
so no old log-probabilities are kept) and KL is Schulman's k3 estimate against the
reference, the model as the job started: a new adapter's is the base, the adapter
switched off (peft's disable_adapter), a model trained further has its starting LoRA
weights swapped in: never a second copy of the base's weights. The loss is the mean over
the step's answer tokens (DAPO's token-level mean). A group whose answers all scored the
same teaches nothing (every advantage is 0) and is left out of the backward, as DAPO's
dynamic sampling leaves it out.

Everything else is the supervised loop's: the schedule, checkpoints and resume (the
samples of a step are seeded by the run's seed and the step, so a resumed run samples
what the first would have), pause and cancel, progress events, which here carry the mean
reward, its spread and the KL.
"""

import random
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from app.core.language import said
from app.graders.sandbox.runner import PythonSandbox
from app.graders.tools import Tools
from app.ml.answer_loss import answer_token_logps
from app.ml.cpu_share import share_cpu_on_another_thread
from app.ml.data import Batch, Example
from app.ml.events import Note, RewardEvaluated, TrainingEvent
from app.ml.precision import autocast_for
from app.ml.serving.requests import Sampling
from app.ml.training.best_weights import WeightsCopy
from app.ml.training.checkpoints import LoopProgress
from app.ml.training.judges import LocalJudge
from app.ml.training.loop import TrainingLoop
from app.ml.training.policy_samples import Completion, PolicySampler, SamplingFailed
from app.ml.training.request import TrainingRequest
from app.ml.training.reward_watch import RewardWatch
from app.ml.training.rewards import Rewards
from app.ml.training.stops import TrainingFailed, obey

if TYPE_CHECKING:
    from app.ml.query_service import QueryService

TEMPERATURE = 1.0  # the policy's own distribution: what GRPO's gradient is an estimate for
# …but never the vanishing tail: a token less likely than 2% of the likeliest is not picked.
# On the built-in byte-level model (hundreds of tokens each a little likely) a half-trained
# FAQ went from 11 to 17 of 20 exact answers with it, and stayed at 11 without.
MIN_P = 0.02
STD_EPSILON = 1e-4
# An answer may be twice the longest reference answer (at least 32, at most 1,024 tokens);
# prompts alone (OpenAI's reinforcement records) give no length: 256
MIN_ANSWER_TOKENS = 32
MAX_ANSWER_TOKENS = 1024
PROMPTS_ONLY_ANSWER_TOKENS = 256


@dataclass(frozen=True)
class Reinforcement:
    """What a reinforcement loop needs beside the supervised loop's: its rewards, the
    prompts it is evaluated on, and how long an answer may be."""

    rewards: Rewards
    max_answer_tokens: int
    validation: list[Example]
    trained_further: bool  # the job started from a trained adapter, not a new one
    judges: "QueryService | None" = None  # the judge models' engines, if the grader has any

    def close(self) -> None:
        if self.judges is not None:
            self.judges.drop_cached()


class ReinforcementLoop(TrainingLoop):
    drills = False  # its loss is not the answers' likelihood
    progress_every_s = 0.0  # every step: its reward is the curve users watch (steps are slow)
    reward_mean = reward_std = kl = 0.0
    graded = errors = 0  # answers scored in all, and those the grader could not score

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        examples: list[Example],
        *,
        reinforcement: Reinforcement,
        **kwargs: Any,
    ) -> None:
        super().__init__(model, tokenizer, examples, **kwargs)
        self.tokenizer = tokenizer
        self.rl = reinforcement
        self.group = self.params.group_size or 2
        self.beta = self.params.beta or 0.0
        self.sampler: PolicySampler | None = None
        self.watch = RewardWatch(self.steps_per_epoch)
        # The LoRA weights of the last step whose samples were healthy: a collapse ends there.
        # Saved every healthy step (a few MB, copied in place) so none of the run is lost.
        self.healthy = WeightsCopy(model)
        self.healthy_step: int | None = None
        # The KL's reference, where the job started (before any checkpoint is loaded)
        self.start_weights = (
            [p.detach().clone() for p in self.trainable] if reinforcement.trained_further else None
        )

    def run(self, resume_from: Path | None = None) -> LoopProgress:
        self.sampler = PolicySampler(
            self.model,
            self.tokenizer,
            device=self.device,
            precision=self.precision.precision,
            max_rows=min(64, self.params.batch_size * self.group),
            between_steps=share_cpu_on_another_thread(self.cpu_share),
        )
        try:
            return super().run(resume_from)
        finally:
            self.sampler.close()
            self.rl.close()
            self.model.train()

    def optimizer_step(self, examples: list[Example]) -> tuple[float, int, int]:
        step = self.scheduler.last_epoch  # steps taken: the one this is, from 0
        obey(self.should_stop())
        prompts = [e for e in examples for _ in range(self.group)]
        completions = self._sample(prompts, step, TEMPERATURE)
        obey(self.should_stop())
        scored = self.rl.rewards.score(
            [c.text for c in completions], [e.item or {} for e in prompts]
        )
        self._count(scored.rewards, scored.errors, scored.first_error)
        if self._stops_here(step, scored.rewards, completions):
            return 0.0, 0, 0
        rewards = torch.tensor(scored.rewards).view(len(examples), self.group)
        std = rewards.std(dim=1, keepdim=True)
        advantages = ((rewards - rewards.mean(dim=1, keepdim=True)) / (std + STD_EPSILON)).view(-1)
        self.reward_mean = rewards.mean().item()
        self.reward_std = std.mean().item()
        taught = [
            (_answered(prompt, completion), advantage)
            for prompt, completion, advantage in zip(
                prompts, completions, advantages.tolist(), strict=True
            )
            if abs(advantage) > 0 and completion.token_ids
        ]
        loss_total, real, computed, kls = 0.0, 0, 0, []
        if not taught:  # every group scored alike: nothing to learn from this step
            self.kl = 0.0
            self._evaluate_if_due(step)
            return 0.0, 0, 0
        answer_tokens = sum(e.answer_tokens for e, _ in taught)
        by_example = {id(e): a for e, a in taught}
        for batch in self.micro_batches([e for e, _ in taught]):
            obey(self.should_stop())
            batch = batch.to(self.device)
            loss, kl = self._policy_loss(batch, by_example)
            loss = loss / answer_tokens
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            loss_total += loss.item()
            kls.append(kl)
            real += batch.real_tokens
            computed += batch.computed_tokens
        self._apply_gradients()
        self.kl = sum(kls) / max(1, answer_tokens)
        self._evaluate_if_due(step)
        return loss_total, real, computed

    def _stops_here(self, step: int, rewards: list[float], completions: list[Completion]) -> bool:
        """Whether the samples say the run ends here (reward_watch.py): it then ends after
        this step, with no update from it, from the last healthy weights if it collapsed."""
        answers = [c.token_ids for c in completions]
        if self.watch.healthy(answers):  # the weights that sampled them: none of this step's
            self.healthy.save()
            self.healthy_step = step
        stop = self.watch.read(step + 1, rewards, answers, self.healthy_step)
        if stop is None:
            return False
        self.judging.total_steps = step + 1
        self.emit(
            TrainingEvent(
                "WARNING",
                said(
                    "Reinforcement ends at step {step}: {reason}", step=step + 1, reason=stop.reason
                ),
                Note(topic="reward_stop", values={"kind": stop.kind, "step": step + 1}),
            )
        )
        if stop.kind == "collapse" and self.healthy_step is not None:
            self.healthy.put_back()
            self.judging.kept_earlier(
                self.healthy_step / self.steps_per_epoch,
                self.healthy_step,
                said("before the sampled answers turned to noise"),
            )
        return True

    def _evaluate_if_due(self, step: int) -> None:
        if (step + 1) % (self.params.eval_interval or self.steps_per_epoch) == 0:
            self._evaluate(step + 1)

    def _policy_loss(self, batch: Batch, advantage_of: dict[int, float]) -> tuple[Any, float]:
        """The batch's summed token loss, and its summed KL to the reference."""
        lengths = [e.answer_tokens for e in batch.examples]
        per_token_advantage = torch.repeat_interleave(
            torch.tensor([advantage_of[id(e)] for e in batch.examples], device=self.device),
            torch.tensor(lengths, device=self.device),
        )
        reference = self._reference_logps(batch) if self.beta else None
        with autocast_for(self.device, self.precision.precision):
            logps = answer_token_logps(self.model, batch)
        ratio = torch.exp(logps - logps.detach())  # 1, with the policy's gradient
        loss = -(per_token_advantage * ratio)
        kl_sum = 0.0
        if reference is not None:
            delta = reference - logps
            kl = torch.exp(delta) - delta - 1  # k3: unbiased, never negative
            loss = loss + self.beta * kl
            kl_sum = kl.detach().sum().item()
        return loss.sum(), kl_sum

    def _reference_logps(self, batch: Batch) -> torch.Tensor:
        """The answer tokens' log-probabilities under the model as the job started: a new
        adapter's B matrices start at zero, so that is the base, the adapter switched off
        (no copy of anything); a model trained further started from its adapter, whose
        weights (the LoRA weights alone, kept from the start) are swapped in for this
        forward. Before the policy's forward: its backward needs the weights it saw."""
        with torch.no_grad(), autocast_for(self.device, self.precision.precision):
            if self.start_weights is None:
                with self.model.disable_adapter():
                    return answer_token_logps(self.model, batch)
            now = [p.detach().clone() for p in self.trainable]
            try:
                for param, start in zip(self.trainable, self.start_weights, strict=True):
                    param.copy_(start)
                return answer_token_logps(self.model, batch)
            finally:
                for param, kept in zip(self.trainable, now, strict=True):
                    param.copy_(kept)

    def _sample(self, prompts: list[Example], step: int, temperature: float) -> list[Completion]:
        """An answer for each prompt; row i of step s has its own seed, so a resumed run
        samples what the first did."""
        assert self.sampler is not None
        seeds = random.Random(f"{self.params.seed}:{step}")
        room = self.params.max_seq_length
        sampling = [
            Sampling(
                max_tokens=max(1, min(self.rl.max_answer_tokens, room - e.prompt_len)),
                temperature=temperature,
                min_p=MIN_P,
                seed=seeds.getrandbits(63),
            )
            for e in prompts
        ]
        self.model.eval()
        try:
            return self.sampler.sample([e.input_ids[: e.prompt_len] for e in prompts], sampling)
        except SamplingFailed as exc:  # the job fails, saying why; the queue moves on
            raise TrainingFailed(said("Sampling answers failed: {why}", why=str(exc))) from exc
        finally:
            self.model.train()

    def _count(self, rewards: list[float], errors: int, first_error: str | None) -> None:
        self.graded += len(rewards)
        if errors and self.errors == 0:
            self.emit(
                TrainingEvent(
                    "WARNING",
                    said(
                        "The grader could not score {errors} of {answers} answers this step (they "
                        "score 0): {why}",
                        errors=errors,
                        answers=len(rewards),
                        why=str(first_error),
                    ),
                )
            )
        self.errors += errors

    def _evaluate(self, step: int) -> None:
        """The mean reward on the validation prompts: greedy with one sample each, else
        `eval_samples` sampled answers each."""
        if not self.rl.validation:
            return
        started = time.perf_counter()
        samples = self.params.eval_samples
        prompts = [e for e in self.rl.validation for _ in range(samples)]
        completions = self._sample(prompts, -step, 0.0 if samples == 1 else TEMPERATURE)
        scored = self.rl.rewards.score(
            [c.text for c in completions], [e.item or {} for e in prompts]
        )
        mean = sum(scored.rewards) / len(scored.rewards)
        self.emit(
            TrainingEvent(
                "INFO",
                said(
                    "Validation reward at step {step}: {mean:.3f} over {prompts} prompts × "
                    "{samples} ({seconds:.1f} s)",
                    step=step,
                    mean=mean,
                    prompts=len(self.rl.validation),
                    samples=samples,
                    seconds=time.perf_counter() - started,
                ),
                RewardEvaluated(
                    step=step,
                    reward_mean=round(mean, 5),
                    prompts=len(self.rl.validation),
                    samples=samples,
                    errors=scored.errors,
                ),
            )
        )

    def _progress_extras(self) -> dict[str, float]:
        return {
            "reward_mean": round(self.reward_mean, 5),
            "reward_std": round(self.reward_std, 5),
            "kl": round(self.kl, 6),
        }


def reinforcement_for(
    request: TrainingRequest, examples: list[Example], validation: list[Example]
) -> Reinforcement:
    """The rewards of the request's grader, with what a training process can offer it: the
    python sandbox when python graders are on."""
    assert request.grader is not None
    limits = request.python_graders
    sandbox = PythonSandbox(limits.in_training()) if limits else None
    judges = None
    if request.judges:
        from app.ml.query_service import QueryService

        judges = QueryService(
            device_plan=request.device_plan,
            model_cache_dir=request.model_cache_dir,
            offline=request.offline,
            configured_models=request.configured_models,
        )
    judge = LocalJudge(request.judges, judges) if judges else None
    prompts_only = all(pair.prompt_only for pair in request.pairs)
    longest = max(e.answer_tokens for e in examples)
    budget = PROMPTS_ONLY_ANSWER_TOKENS if prompts_only else 2 * longest
    return Reinforcement(
        rewards=Rewards(request.grader, Tools(judge=judge, sandbox=sandbox)),
        max_answer_tokens=min(MAX_ANSWER_TOKENS, max(MIN_ANSWER_TOKENS, budget)),
        validation=validation,
        trained_further=request.start is not None,
        judges=judges,
    )


def _answered(prompt: Example, completion: Completion) -> Example:
    """The prompt with the sampled answer: what the loss is over."""
    ids = prompt.input_ids[: prompt.prompt_len] + completion.token_ids
    return replace(prompt, input_ids=ids, rejected=None, reference=None)
