"""TRL's DPOTrainer + peft on OpenAI preference records, as bench/dpo_throughput.py runs it
(in TRL's own virtual environment: this file imports nothing of qatune).

    python dpo_trl_child.py MODEL_DIR DATA OUTPUT EPOCHS METRICS_JSON

A careful user's settings: LoRA through `peft_config` (the reference is the model with the
adapter switched off, no second copy), the reference log-probabilities computed once
before training (`precompute_ref_log_probs`), no dropout, the same rank, alpha, learning
rate, batch, beta and NLL weight (`loss_type=["sigmoid", "sft"]`) as qatune's run.
"""

import json
import sys
import time
from typing import Any

import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import DPOConfig, DPOTrainer


class Losses(TrainerCallback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
        if logs and "loss" in logs:
            self.losses.append(float(logs["loss"]))


def main() -> None:
    model_dir, data, output, epochs, metrics_out = sys.argv[1:6]
    records = [json.loads(line) for line in open(data) if line.strip()]
    dataset = Dataset.from_list(
        [
            {
                "prompt": r["input"]["messages"],
                "chosen": r["preferred_output"],
                "rejected": r["non_preferred_output"],
            }
            for r in records
        ]
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = DPOConfig(
        output_dir=output,
        num_train_epochs=int(epochs),
        per_device_train_batch_size=8,
        learning_rate=2e-4,
        lr_scheduler_type="linear",
        warmup_steps=0,
        beta=0.1,
        loss_type=["sigmoid", "sft"],  # DPO plus the preferred answers' NLL (RPO), weights 1
        loss_weights=[1.0, 1.0],
        precompute_ref_log_probs=True,
        max_length=4096,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=42,
        use_cpu=True,
        dataloader_num_workers=0,
    )
    lora = LoraConfig(
        r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
    )
    losses = Losses()
    trainer = DPOTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=lora,
        callbacks=[losses],
    )
    started = time.perf_counter()
    trainer.train()
    loop = time.perf_counter() - started
    trainer.save_model(output)
    with open(metrics_out, "w") as out:
        json.dump({"loop_s": loop, "losses": losses.losses}, out)


if __name__ == "__main__":
    main()
