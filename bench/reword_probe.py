"""How well the base model itself tells a FAQ's reworded questions apart: a linear probe.

    python -m bench.reword_probe --sets staff product

A reworded question is answered right when the model places it with the pair it rewords.
This asks how much of that the frozen base already holds: for each layer of
SmolLM2-135M-Instruct, a multinomial logistic regression is fitted on the base's features
of the FAQ's questions (each with copies that drop 30% of its words, as the adapter's
scope is fitted) and asked which pair each rewording belongs to. Two readings of a
question: its tokens' states averaged, no template (the scope's features), and the state
of the chat-templated question's last token, where the model starts its answer.

The best layer is the most a linear reader of the frozen base gets; bench.quality_real's
reworded figure for the same set says what training the adapter reaches beyond it.
"""

import argparse
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from app.ml.scope import WORD_DROP, with_words_dropped
from bench.quality_real import faq
from bench.real_model import real_model_dir

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

COPIES = 10  # word-dropped copies of each question beside it
PENALTY = 1e-2  # L2 on the probe's weights: ~600 dimensions, a few hundred questions
STEPS = 200  # L-BFGS iterations: the fit is convex


@dataclass(frozen=True)
class Reading:
    name: str
    templated: bool  # the chat template around the question, its last token read


READINGS = (
    Reading("question tokens averaged", templated=False),
    Reading("last token, chat template", templated=True),
)


def states(
    model: "PreTrainedModel", tokenizer: "PreTrainedTokenizerBase", texts: list[str],
    reading: Reading,
) -> torch.Tensor:  # fmt: skip
    """(texts, layers + 1, hidden): each text's hidden state at every layer, read as asked."""
    rows = []
    for text in texts:
        prompt = text
        if reading.templated:
            chat = [{"role": "user", "content": text}]
            prompt = str(
                tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
            )
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            hidden = model(ids, output_hidden_states=True).hidden_states
        rows.append(torch.stack([h[0, -1] if reading.templated else h[0].mean(0) for h in hidden]))
    return torch.stack(rows).float()


def placed_right(train: torch.Tensor, labels: torch.Tensor, test: torch.Tensor,
                 answers: torch.Tensor) -> int:  # fmt: skip
    """How many test rows a probe fitted on the train rows gives their own pair."""
    mean, scale = train.mean(0), train.std(0) + 1e-4
    train, test = (train - mean) / scale, (test - mean) / scale
    classes = int(labels.max()) + 1
    weight = torch.zeros(train.shape[1], classes, requires_grad=True)
    bias = torch.zeros(classes, requires_grad=True)
    optimizer = torch.optim.LBFGS([weight, bias], max_iter=STEPS)

    def loss() -> torch.Tensor:
        optimizer.zero_grad()
        value = torch.nn.functional.cross_entropy(train @ weight + bias, labels)
        value = value + PENALTY * weight.pow(2).sum()
        value.backward()
        return value

    optimizer.step(loss)
    with torch.no_grad():
        return int(((test @ weight + bias).argmax(1) == answers).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["staff", "product"])
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = real_model_dir()
    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    print("| set | reading | best layer | rewordings placed right | by layer (0, 3, 6, …) |")
    print("|---|---|---:|---:|---|")
    for name in args.sets:
        pairs = faq(name).pairs
        rng = random.Random(0)
        questions: list[str] = []
        for pair in pairs:
            copies = [with_words_dropped(pair["question"], rng, WORD_DROP) for _ in range(COPIES)]
            questions += [pair["question"], *copies]
        labels = torch.arange(len(pairs)).repeat_interleave(1 + COPIES)
        reworded = [(text, index) for index, p in enumerate(pairs) for text in p["reworded"]]
        answers = torch.tensor([index for _, index in reworded])
        for reading in READINGS:
            train = states(model, tokenizer, questions, reading)
            test = states(model, tokenizer, [text for text, _ in reworded], reading)
            right = [
                placed_right(train[:, layer], labels, test[:, layer], answers)
                for layer in range(0, train.shape[1], 3)
            ]
            best = max(range(len(right)), key=right.__getitem__)
            print(
                f"| {name} | {reading.name} | {best * 3} | {right[best]}/{len(reworded)} "
                f"({right[best] / len(reworded):.0%}) | {', '.join(map(str, right))} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
