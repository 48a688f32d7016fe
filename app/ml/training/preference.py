"""Preference tuning (DPO, Rafailov et al. 2023) on the supervised loop's machinery.

Each training example is a preferred answer with its non-preferred twin (`Example.rejected`,
the same prompt). The loss is DPO's: -log σ(β((log π(y⁺) − log π_ref(y⁺)) − (log π(y⁻) −
log π_ref(y⁻)))), the log-probabilities summed over each answer's tokens. The reference is
the model as the job starts (the base with a new adapter, whose B matrices are zero, or
the fine-tuned model it trains further), so its log-probabilities are computed once,
before the first step, with no second copy of the weights and no reference forward a step.
Both answers of a pair go through one forward (one flat row, their shared prefix once).

Everything else is the supervised loop's: the schedule, checkpoints and resume, pause and
cancel, and auto epochs, which stop once every preferred answer is the greedy one.
"""

from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

from app.ml.answer_loss import answer_logps
from app.ml.data import Batch, Example, collate_flat, collate_rows
from app.ml.hyperparameters import DEFAULT_BETA
from app.ml.precision import autocast_for
from app.ml.training.checkpoints import LoopProgress
from app.ml.training.loop import TrainingLoop
from app.ml.training.stops import obey

PREFERRED_NLL_WEIGHT = 1.0  # RPO's alpha: the usual value (TRL's rpo_alpha recommendation)


class PreferenceLoop(TrainingLoop):
    """The loop with DPO's loss; `examples` are preferred answers with `rejected` set."""

    drills = False  # its loss is not the answers' likelihood
    margin = 0.0  # the last step's mean reward margin, and the share of pairs it ranks right
    accuracy = 0.0

    def run(self, resume_from: Path | None = None) -> LoopProgress:
        self.judging.examples = self._with_references(self.judging.examples)
        return super().run(resume_from)

    def _pair_batch(self, pairs: list[Example]) -> Batch:
        """Preferred answers first, then their twins, in one flat row (else a row each)."""
        both = [*pairs, *(e.rejected for e in pairs if e.rejected is not None)]
        batching = self.micro_batches
        if batching.flat:
            return collate_flat(both, batching.pad_id)
        return collate_rows([[e] for e in both], batching.pad_id)

    def _groups(self, pairs: list[Example]) -> list[list[Example]]:
        """The step's pairs in micro-batches of at most micro_tokens (at least one pair)."""
        groups: list[list[Example]] = [[]]
        used = 0
        for pair in pairs:
            tokens = pair.num_tokens + (pair.rejected.num_tokens if pair.rejected else 0)
            if groups[-1] and used + tokens > self.micro_batches.micro_tokens:
                groups.append([])
                used = 0
            groups[-1].append(pair)
            used += tokens
        return groups

    def _with_references(self, pairs: list[Example]) -> list[Example]:
        """The starting model's log-probabilities of both answers of every pair, once."""
        if all(e.reference is not None for e in pairs):
            return pairs
        self.model.eval()
        found = []
        with torch.no_grad():
            for group in self._groups(pairs):
                batch = self._pair_batch(group).to(self.device)
                with autocast_for(self.device, self.precision.precision):
                    logps = answer_logps(self.model, batch).tolist()
                k = len(group)
                found += [
                    replace(e, reference=(logps[i], logps[k + i])) for i, e in enumerate(group)
                ]
        self.model.train()
        return found

    def optimizer_step(self, examples: list[Example]) -> tuple[float, int, int]:
        """DPO's loss on the step's pairs; the replayed answers beside them (the starting
        model's own, keeping.py) with the supervised loss, so that moving the preferred
        answers does not erase the rest of what the model was taught."""
        replayed = [e for e in examples if e.replay]
        examples = [e for e in examples if not e.replay]
        beta = self.params.beta or DEFAULT_BETA
        preferred_tokens = sum(e.answer_tokens for e in examples)
        total_loss, real, computed, margins = 0.0, 0, 0, []
        for group in self._groups(examples):
            obey(self.should_stop())
            batch = self._pair_batch(group).to(self.device)
            hits = self.judging.hits_for(batch) if self.until_learned else None
            with autocast_for(self.device, self.precision.precision):
                logps = answer_logps(self.model, batch, hits)
            k = len(group)
            reference = torch.tensor([e.reference for e in group], device=logps.device)
            margin = beta * ((logps[:k] - reference[:, 0]) - (logps[k:] - reference[:, 1]))
            loss = -F.logsigmoid(margin).sum() / len(examples)
            # RPO (Pang et al. 2024): the preferred answers' own likelihood too, or DPO may
            # push both answers down and the preferred one never becomes the greedy one.
            loss = loss - PREFERRED_NLL_WEIGHT * logps[:k].sum() / preferred_tokens
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            total_loss += loss.item()
            margins += margin.detach().tolist()
            real += batch.real_tokens
            computed += batch.computed_tokens
            if self.until_learned is not None and hits is not None:  # the preferred answers
                preferred = sum(e.answer_tokens for e in group)
                view = replace(batch, examples=tuple(group), answer_tokens=preferred)
                self.until_learned.record(view, hits.cpu())
        if replayed:
            kept_tokens = sum(e.answer_tokens for e in replayed)
            for batch in self.micro_batches(replayed):
                obey(self.should_stop())
                loss = self.judging.score(batch.to(self.device), None) / kept_tokens
                (self.scaler.scale(loss) if self.scaler else loss).backward()
                total_loss += loss.item()
                real += batch.real_tokens
                computed += batch.computed_tokens
        self._apply_gradients()
        self.margin = sum(margins) / len(margins)
        self.accuracy = sum(m > 0 for m in margins) / len(margins)
        return total_loss, real, computed

    def _progress_extras(self) -> dict[str, float]:
        return {"reward_margin": round(self.margin, 5), "reward_accuracy": round(self.accuracy, 4)}
