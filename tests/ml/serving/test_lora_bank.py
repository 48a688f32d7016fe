"""The bank's stacked adapters against each row run alone through peft: any mix of adapters,
ranks, targets and rows without an adapter, in one forward; slots that come and go."""

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from app.ml.builtin import ensure_builtin_model
from app.ml.models import load_causal_lm
from app.ml.serving.lora_bank import BASE, LoraBank, read_lora
from app.ml.training.adapter_metadata import AdapterInvalid

# different ranks and targets: a stack pads the smaller ranks, skips untargeted layers
ADAPTERS = {
    "a0": (4, ["q_proj", "v_proj"]),
    "a1": (8, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
    "a2": (16, ["up_proj", "down_proj", "v_proj"]),
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return ensure_builtin_model(tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def saved(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each adapter's directory, as peft writes it (random weights: each one matters)."""
    from peft import LoraConfig, get_peft_model

    root = tmp_path_factory.mktemp("adapters")
    for seed, (name, (rank, targets)) in enumerate(ADAPTERS.items()):
        torch.manual_seed(seed)
        base = load_causal_lm(model_dir, dtype=torch.float32, device="cpu")
        config = LoraConfig(
            r=rank, lora_alpha=2 * rank, target_modules=targets, init_lora_weights=False
        )
        get_peft_model(base, config).save_pretrained(str(root / name))
    return {name: root / name for name in ADAPTERS}


def alone(model_dir: Path, directory: Path | None, ids: torch.Tensor) -> torch.Tensor:
    """The logits of one row through peft's own forward (or the bare base)."""
    from peft import PeftModel

    model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu").eval()
    if directory is not None:
        model = PeftModel.from_pretrained(model, directory).eval()
    with torch.inference_mode():
        return model(input_ids=ids[None]).logits[0]


def bank_of(model_dir: Path, saved: dict[str, Path], budget: int = 0) -> tuple[Any, LoraBank]:
    model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu").eval()
    bank = LoraBank(model, merge_budget_bytes=budget, device="cpu", dtype=torch.float32)
    for name, directory in saved.items():
        bank.add(name, read_lora(directory, torch.float32))
    return model, bank


@pytest.mark.parametrize(
    "rows",
    [
        ["a0", "a1", "a2", BASE],  # every loaded adapter
        ["a2", BASE, "a0", "a2"],  # some of them: their columns only
        ["a1", "a1", "a2"],
        ["a1"],  # one adapter, not merged (no budget): its slot alone
    ],
)
def test_stacked_rows_answer_as_each_alone(
    model_dir: Path, saved: dict[str, Path], rows: list[str]
) -> None:
    torch.manual_seed(0)
    ids = torch.randint(3, 250, (len(rows), 7))
    expected = [alone(model_dir, saved.get(a), ids[i]) for i, a in enumerate(rows)]
    model, bank = bank_of(model_dir, saved)
    pristine = alone(model_dir, None, ids[0])
    with torch.inference_mode():
        bank.forward_options(rows)
        stacked = model(input_ids=ids).logits
        bank.release()
        after = model(input_ids=ids[:1]).logits[0]
    for i in range(len(rows)):
        # batched matmuls sum in another order than one row's: ~1e-5 apart, base rows too
        torch.testing.assert_close(stacked[i], expected[i], rtol=1e-4, atol=1e-4)
    different = [r for r in rows if r != BASE]
    assert len({round(expected[rows.index(r)].sum().item(), 3) for r in different}) == len(
        set(different)
    )  # each adapter really changes the answer
    torch.testing.assert_close(after, pristine, rtol=0, atol=0)  # released: the bare base


def test_slots_are_reused_and_grow_without_touching_the_others(
    model_dir: Path, saved: dict[str, Path]
) -> None:
    torch.manual_seed(1)
    ids = torch.randint(3, 250, (1, 7))
    model, bank = bank_of(model_dir, {"a1": saved["a1"]})
    with torch.inference_mode():
        bank.forward_options(["a1"])
        first = model(input_ids=ids).logits
        for n in range(11):  # past the first four slots, twice
            name = list(ADAPTERS)[n % 3]
            bank.add(f"{name}-{n}", read_lora(saved[name], torch.float32))
        assert bank.capacity == 16 and len(bank.keys) == 12
        bank.forward_options(["a1"])
        torch.testing.assert_close(model(input_ids=ids).logits, first, rtol=1e-5, atol=1e-5)
        for n in range(11):
            bank.remove(f"{list(ADAPTERS)[n % 3]}-{n}")
        bank.add("again", read_lora(saved["a1"], torch.float32))
        assert bank.capacity == 16  # a freed slot, not a new one
        bank.forward_options(["again", "a1"])
        both = model(input_ids=ids.repeat(2, 1)).logits
    torch.testing.assert_close(both[0], first[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(both[1], first[0], rtol=1e-5, atol=1e-5)


def test_merging_one_adapter_answers_as_stacked_and_unmerging_is_exact(
    model_dir: Path, saved: dict[str, Path]
) -> None:
    torch.manual_seed(2)
    ids = torch.randint(3, 250, (2, 7))
    model, bank = bank_of(model_dir, saved, budget=2**30)
    pristine = {name: p.detach().clone() for name, p in model.named_parameters()}
    with torch.inference_mode():
        bank.forward_options(["a1", "a0"])  # stacked: nothing merged
        stacked = model(input_ids=ids).logits[0]
        bank.forward_options(["a1", "a1"])
        assert bank.merged == "a1"
        merged = model(input_ids=ids).logits[0]
        bank.forward_options([BASE])
    torch.testing.assert_close(merged, stacked, rtol=1e-4, atol=1e-4)
    assert bank.merged is None
    for name, weight in model.named_parameters():
        assert torch.equal(weight, pristine[name]), name


def test_adapters_the_bank_cannot_run_are_refused(
    model_dir: Path, saved: dict[str, Path], tmp_path: Path
) -> None:
    import shutil

    dora = shutil.copytree(saved["a0"], tmp_path / "dora")
    config = json.loads((dora / "adapter_config.json").read_text())
    (dora / "adapter_config.json").write_text(json.dumps({**config, "use_dora": True}))
    with pytest.raises(AdapterInvalid, match="use_dora"):
        read_lora(dora, torch.float32)

    model = load_causal_lm(model_dir, dtype=torch.float32, device="cpu").eval()
    bank = LoraBank(model, merge_budget_bytes=0, device="cpu", dtype=torch.float32)
    weights = read_lora(saved["a0"], torch.float32)
    foreign = type(weights)({f"elsewhere.{name}": ab for name, ab in weights.layers.items()})
    with pytest.raises(AdapterInvalid, match="does not have"):
        bank.add("foreign", foreign)
    assert bank.keys == [] and bank.capacity == 0
