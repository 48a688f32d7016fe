"""TRL's GRPOTrainer + peft on question-answer pairs with an exact-answer reward, as
bench/grpo_throughput.py runs it (in TRL's own virtual environment: this file imports
nothing of qatune).

    python grpo_trl_child.py MODEL_DIR DATA OUTPUT SETTINGS_JSON METRICS_JSON

A careful user's settings, the same as qatune's run: LoRA through `peft_config` (the KL's
reference is the model with the adapter switched off), the same rank, alpha, learning
rate, prompts a step, answers a prompt, temperature, min_p, answer length, KL coefficient
and epochs; the token-level loss (`loss_type="dapo"`), one update per sampling
(`num_iterations=1`), generation by transformers' `generate` (no vLLM on a CPU).
"""

import json
import sys
import time
from typing import Any

import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer


class Rewards(TrainerCallback):
    def __init__(self) -> None:
        self.rewards: list[float] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if logs and "reward" in logs:
            self.rewards.append(float(logs["reward"]))


def exact(completions: list[Any], answer: list[str], **kw: Any) -> list[float]:
    """1 when the answer is the reference exactly (qatune's string_check eq)."""
    texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
    return [float(text == reference) for text, reference in zip(texts, answer, strict=True)]


def main() -> None:
    model_dir, data, output, settings_json, metrics_out = sys.argv[1:6]
    settings = json.loads(settings_json)
    pairs = [json.loads(line) for line in open(data) if line.strip()]
    dataset = Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": p["question"]}], "answer": p["answer"]}
            for p in pairs
        ]
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    group, prompts = settings["group_size"], settings["batch_size"]
    config = GRPOConfig(
        output_dir=output,
        num_train_epochs=settings["epochs"],
        per_device_train_batch_size=prompts * group,  # completions a step
        num_generations=group,
        learning_rate=settings["learning_rate"],
        lr_scheduler_type="linear",
        warmup_steps=0,
        beta=settings["beta"],
        temperature=settings["temperature"],
        min_p=settings["min_p"],
        max_completion_length=settings["max_answer_tokens"],
        loss_type="dapo",
        gradient_checkpointing=False,  # TRL's default is on; qatune checkpoints only if it must
        num_iterations=1,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=42,
        use_cpu=True,
        dataloader_num_workers=0,
    )
    lora = LoraConfig(
        r=settings["lora_r"],
        lora_alpha=settings["lora_alpha"],
        lora_dropout=0.0,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    rewards = Rewards()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=exact,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=[rewards],
    )
    started = time.perf_counter()
    trainer.train()
    loop = time.perf_counter() - started
    trainer.save_model(output)
    with open(metrics_out, "w") as out:
        json.dump({"loop_s": loop, "rewards": rewards.rewards}, out)


if __name__ == "__main__":
    main()
