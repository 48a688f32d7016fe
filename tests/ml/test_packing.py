"""Packing must not change the loss: a packed batch gives each example its lone loss."""

import gc
from pathlib import Path

import pytest
import torch

from app.ml.answer_loss import answer_loss_sum
from app.ml.data import Batch, Example, collate_rows, encode_pairs, pack_rows
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.pairs import QAPair
from tests.conftest import training_pairs


@pytest.fixture(scope="module")
def model_and_tokenizer(model_cache: Path) -> tuple[object, object]:
    model_dir = model_cache / "builtin-tiny-v2"
    return load_causal_lm(model_dir, dtype=torch.float32, device="cpu"), load_tokenizer(model_dir)


def test_packed_losses_equal_one_by_one_losses(model_and_tokenizer: tuple[object, object]) -> None:
    model, tokenizer = model_and_tokenizer
    pairs = training_pairs()[:6]
    examples, _ = encode_pairs(tokenizer, pairs, 512)
    alone = [answer_loss_sum(model, collate_rows([[e]], pad_id=0)).item() for e in examples]

    rows = pack_rows(examples, row_tokens=400)
    assert len(rows) < len(examples)  # several examples share a row
    packed = collate_rows(rows, pad_id=0)
    total = answer_loss_sum(model, packed).item()
    assert total == pytest.approx(sum(alone), rel=1e-4)
    # And example by example: mask out all but one example's targets.
    for example in examples:
        batch = collate_rows(rows, pad_id=0)
        keep = _targets_of(batch, rows, example)
        batch.target_index, batch.targets = batch.target_index[keep], batch.targets[keep]
        assert answer_loss_sum(model, batch).item() == pytest.approx(
            alone[examples.index(example)], rel=1e-4
        )


def _targets_of(batch: object, rows: list[list[Example]], wanted: Example) -> torch.Tensor:
    length = batch.input_ids.shape[1]  # type: ignore[attr-defined]
    keep = torch.zeros(len(batch.targets), dtype=torch.bool)  # type: ignore[attr-defined]
    for r, row in enumerate(rows):
        start = 0
        for example in row:
            if example is wanted:
                lo, hi = r * length + start, r * length + start + example.num_tokens
                idx = batch.target_index  # type: ignore[attr-defined]
                keep |= (idx >= lo) & (idx < hi)
            start += example.num_tokens
    return keep


def test_only_answer_tokens_are_targets(model_and_tokenizer: tuple[object, object]) -> None:
    _, tokenizer = model_and_tokenizer
    (example,), _ = encode_pairs(tokenizer, [QAPair("Q?", "Yes.")], 512)
    batch = collate_rows([[example]], pad_id=0)
    answer = tokenizer.decode(batch.targets.tolist())  # type: ignore[attr-defined]
    assert answer.startswith("Yes.<|im_end|>")


def test_the_shared_prefix_stops_before_the_token_that_predicts_the_answer() -> None:
    from app.ml.data import shared_prefix_len

    system = [1, 2, 3, 4]
    a, b = Example([*system, 7, 8, 9, 10], 6), Example([*system, 7, 8, 11, 12], 6)
    assert shared_prefix_len([a, b]) == 5  # [1, 2, 3, 4, 7]; 8 predicts the answer
    assert shared_prefix_len([a, Example([*system, 5, 6, 7], 5)]) == 4
    assert shared_prefix_len([a, Example([9, 2, 3], 2)]) == 0
    assert shared_prefix_len([a]) == 0  # nothing to share


def test_the_plan_knows_the_prefix_all_the_examples_share() -> None:
    from app.ml.data import data_facts

    system = [1, 2, 3, 4]
    examples = [Example([*system, 7, n, 9], 6) for n in range(3)]
    assert data_facts(examples).shared_prefix == 5
    assert data_facts([*examples, Example([9, 2, 3], 2)]).shared_prefix == 0


def test_rows_pack_first_fit_decreasing() -> None:
    examples = [Example(list(range(n)), 1) for n in (100, 90, 60, 50, 40, 300)]
    rows = pack_rows(examples, row_tokens=200)
    assert [[e.num_tokens for e in row] for row in rows] == [[300], [100, 90], [60, 50, 40]]


@pytest.mark.slow  # a forward and backward of every example, twice: seconds each
@pytest.mark.parametrize("math_below", [0, 10**9], ids=["flash", "math"])
def test_flat_batches_with_varlen_attention_equal_one_by_one_losses(
    model_cache: Path, math_below: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With either attention kernel per example: flash, or math (short examples on CPU)."""
    from app.ml import varlen_attention
    from app.ml.data import bucket_length, collate_flat
    from app.ml.varlen_attention import enable_varlen

    monkeypatch.setattr(varlen_attention, "CPU_MATH_BELOW_TOKENS", math_below)
    model_dir = model_cache / "builtin-tiny-v2"
    model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu")
    tokenizer = load_tokenizer(model_dir)
    examples, _ = encode_pairs(tokenizer, training_pairs(), 512)
    alone = [answer_loss_sum(model, collate_rows([[e]], pad_id=0)).item() for e in examples]
    assert enable_varlen(model)
    flat = collate_flat(examples)
    # The chat template's opening ("<|im_start|>user\n") is in the row once.
    shared = flat.shared_prefix
    assert shared == len(tokenizer("<|im_start|>user\n").input_ids)
    assert flat.real_tokens == sum(e.num_tokens for e in examples)
    once = flat.real_tokens - (len(examples) - 1) * shared  # one copy instead of one each
    assert flat.computed_tokens == flat.input_ids.shape[1] == bucket_length(once) > once
    assert answer_loss_sum(model, flat).item() == pytest.approx(sum(alone), rel=1e-4)
    # Each example's own loss out of the flat row: the first, the last and one between
    # (each check is a forward of the whole row).
    for i in sorted({0, len(examples) // 2, len(examples) - 1}):
        one = collate_flat(examples)
        assert one.seq_lens is not None
        start = shared + sum(one.seq_lens[:i])
        keep = (one.target_index >= start) & (one.target_index < start + one.seq_lens[i])
        one.target_index, one.targets = one.target_index[keep], one.targets[keep]
        assert answer_loss_sum(model, one).item() == pytest.approx(alone[i], rel=1e-4)
    # The masked-rows path still works on the same model (evaluation uses it).
    rows = collate_rows(pack_rows(examples, 400), pad_id=0)
    assert answer_loss_sum(model, rows).item() == pytest.approx(sum(alone), rel=1e-4)


def test_math_and_flash_attention_give_the_same_gradients(
    model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from peft import LoraConfig, get_peft_model

    from app.ml import varlen_attention
    from app.ml.data import collate_flat

    model_dir = model_cache / "builtin-tiny-v2"
    tokenizer = load_tokenizer(model_dir)
    model = get_peft_model(
        load_causal_lm(model_dir, dtype=torch.float32, device="cpu"),
        LoraConfig(r=4, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.02)
    assert varlen_attention.enable_varlen(model)
    pairs = training_pairs()[:7]
    examples = encode_pairs(tokenizer, pairs, 512)[0]
    batch = collate_flat(examples)
    assert batch.shared_prefix > 0

    def lora_grads(batch: Batch) -> torch.Tensor:
        model.zero_grad()
        answer_loss_sum(model, batch).backward()
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    grads = {}
    for mode, math_below in (("flash", 0), ("math", 10**9)):
        monkeypatch.setattr(varlen_attention, "CPU_MATH_BELOW_TOKENS", math_below)
        grads[mode] = lora_grads(batch)
    assert (grads["flash"] - grads["math"]).norm() <= 1e-4 * grads["flash"].norm()
    # The prefix's one copy gathers what every example's copy would have: the same
    # gradients as masked rows, where each example has its own copy.
    rows = lora_grads(collate_rows(pack_rows(examples, 400), pad_id=0))
    assert (grads["math"] - rows).norm() <= 1e-4 * rows.norm()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_varlen_probe_accepts_the_model_and_refuses_a_leaky_attention(
    model_cache: Path, dtype: torch.dtype
) -> None:
    from transformers import AttentionInterface

    from app.ml import varlen_attention

    def leaky(module, query, key, value, attention_mask, **kwargs):  # type: ignore[no-untyped-def]
        out = torch.nn.functional.scaled_dot_product_attention(
            query, key, value, is_causal=True, enable_gqa=query.shape[1] != key.shape[1]
        )
        return out.transpose(1, 2).contiguous(), None

    def prefix_blind(module, query, key, value, attention_mask, **kwargs):  # type: ignore[no-untyped-def]
        # Treats the shared prefix as one more example: nobody else sees it.
        prefix = kwargs.pop("qatune_shared_prefix", 0)
        lens = [prefix, *kwargs.pop("qatune_seq_lens")] if prefix else kwargs.pop("qatune_seq_lens")
        return varlen_attention.varlen_attention(
            module, query, key, value, attention_mask, qatune_seq_lens=lens, **kwargs
        )

    model = load_causal_lm(model_cache / "builtin-tiny-v2", dtype=dtype, device="cpu")
    assert varlen_attention.enable_varlen(model)  # bf16 rounding is not mistaken for a leak
    for name, attention in (("leaky", leaky), ("prefix_blind", prefix_blind)):
        AttentionInterface.register(f"qatune_test_{name}", attention)
        model.config._attn_implementation = f"qatune_test_{name}"
        assert not varlen_attention._isolates_examples(model), name


def test_flat_rows_come_in_a_few_lengths_with_little_padding() -> None:
    from app.ml.data import bucket_length

    lengths = [bucket_length(n) for n in range(1, 20_000)]
    assert all(n <= b <= max(n * 9 // 8, n + 15) for n, b in enumerate(lengths, start=1))
    assert lengths == sorted(lengths)
    assert len(set(lengths)) < 120  # 8 a doubling: kernels are made once per length


def test_bf16_attention_on_the_cpu_keeps_no_kernel_for_each_new_length() -> None:
    """The CPU makes and keeps bf16 attention kernels for every length it meets (2-5 MB
    each: a long job's example lengths grew the heap by a GB, bench/rss_by_phase.py); the
    packed path attends in fp32 there, whose kernels are not kept."""
    from app.ml.memory import malloc_figures
    from app.ml.varlen_attention import _causal_attention

    def attend(length: int) -> None:
        q, k, v = (
            torch.randn(1, 4, length, 64, dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        _causal_attention(q, k, v, 0.0, None, False, 192).float().sum().backward()

    if malloc_figures() is None:
        pytest.skip("glibc's malloc figures are not available here")
    for length in range(200, 210):  # whatever is made once, whatever the length
        attend(length)
    gc.collect()
    before = malloc_figures()
    for length in range(210, 270):
        attend(length)
    gc.collect()
    after = malloc_figures()
    assert before is not None and after is not None
    assert (after.in_use - before.in_use) / 2**20 < 40
