"""Stacked adapters against each row run alone through peft: any mix of adapters, ranks,
targets and rows without an adapter, in one forward."""

from pathlib import Path
from typing import Any

import pytest
import torch

from app.ml.builtin import ensure_builtin_model
from app.ml.models import load_causal_lm
from app.ml.serving.adapter_modes import BASE, AdapterModes

# different ranks and targets: a stack pads the smaller ranks, skips untargeted layers
ADAPTERS = {
    "a0": (4, ["q_proj", "v_proj"]),
    "a1": (8, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]),
    "a2": (16, ["up_proj", "down_proj", "v_proj"]),
}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from peft import LoraConfig, get_peft_model

    model_dir: Path = ensure_builtin_model(tmp_path_factory.mktemp("models"))
    base = load_causal_lm(model_dir, dtype=torch.float32, device="cpu").eval()
    peft_model = None
    for seed, (name, (rank, targets)) in enumerate(ADAPTERS.items()):
        torch.manual_seed(seed)
        config = LoraConfig(
            r=rank, lora_alpha=2 * rank, target_modules=targets, init_lora_weights=False
        )
        if peft_model is None:
            peft_model = get_peft_model(base, config, adapter_name=name)
        else:
            peft_model.add_adapter(name, config)
    assert peft_model is not None
    return peft_model.eval()


def alone(model: Any, ids: torch.Tensor, adapter: str) -> torch.Tensor:
    """The logits of one row through peft's own forward."""
    if adapter == BASE:
        with model.disable_adapter():
            return model(input_ids=ids[None]).logits[0]
    model.set_adapter(adapter)
    return model(input_ids=ids[None]).logits[0]


@pytest.mark.parametrize(
    "rows",
    [
        ["a0", "a1", "a2", BASE],  # every loaded adapter
        ["a2", BASE, "a0", "a2"],  # some of them: their columns only
        ["a1", "a1", "a2"],
    ],
)
def test_stacked_rows_answer_as_each_alone(model: Any, rows: list[str]) -> None:
    torch.manual_seed(0)
    ids = torch.randint(3, 250, (len(rows), 7))
    with torch.inference_mode():
        expected = [alone(model, ids[i], adapter) for i, adapter in enumerate(rows)]
        before = alone(model, ids[0], "a0")
        modes = AdapterModes(model, merge_budget_bytes=0, device="cpu")
        modes.restack(torch.float32)
        modes.forward_options(rows)
        stacked = model(input_ids=ids).logits
        modes.release()
        model.base_model.enable_adapter_layers()
        model.set_adapter("a0")
        after = alone(model, ids[0], "a0")
    for i in range(len(rows)):
        # batched matmuls sum in another order than one row's: ~1e-5 apart, base rows too
        torch.testing.assert_close(stacked[i], expected[i], rtol=1e-4, atol=1e-4)
    different = [r for r in rows if r != BASE]
    assert len({round(expected[rows.index(r)].sum().item(), 3) for r in different}) == len(
        set(different)
    )  # each adapter really changes the answer
    assert torch.equal(after, before)  # released: peft's own forward, as before
