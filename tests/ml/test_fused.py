"""The fused ops must compute what the unfused ones do: values and gradients."""

import copy
from pathlib import Path

import pytest
import torch
from peft import LoraConfig, PeftModel, get_peft_model

from app.ml import fused
from app.ml.answer_loss import answer_loss_sum
from app.ml.data import encode_pairs, micro_batches
from app.ml.fused import fuse_lora, linear_cross_entropy_sum
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.varlen_attention import enable_varlen
from tests.conftest import training_pairs


class TwoLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(16, 24, bias=True)
        self.down = torch.nn.Linear(24, 16, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down(torch.relu(self.up(x)))
        return out


def lora_pair(dropout: float, dtype: torch.dtype) -> tuple[PeftModel, PeftModel]:
    torch.manual_seed(0)
    model = get_peft_model(
        TwoLayers().to(dtype),
        LoraConfig(r=4, lora_alpha=8, lora_dropout=dropout, target_modules=["up", "down"]),
        autocast_adapter_dtype=True,  # LoRA weights stay fp32, as in training
    )
    for name, param in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: make the update count
            torch.nn.init.normal_(param, std=0.5)
    fast = copy.deepcopy(model)
    assert fuse_lora(fast) == 2
    return model, fast


def forward_backward(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    x = x.clone().requires_grad_()
    torch.manual_seed(1)  # the same dropout masks for both models
    model(x).float().square().sum().backward()
    grads = [p.grad for n, p in sorted(model.named_parameters()) if p.requires_grad]
    assert x.grad is not None and all(g is not None for g in grads)
    return (model(x).detach(), x.grad, *(g for g in grads if g is not None))


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_fused_lora_matches_peft_in_fp32(dropout: float) -> None:
    model, fast = lora_pair(dropout, torch.float32)
    x = torch.randn(3, 5, 16)
    model.eval(), fast.eval()
    assert torch.allclose(model(x), fast(x), atol=1e-5)
    model.train(), fast.train()
    for want, got in zip(forward_backward(model, x), forward_backward(fast, x), strict=True):
        assert got.dtype == want.dtype
        assert torch.allclose(want, got, rtol=1e-4, atol=1e-5)


def test_fused_lora_matches_peft_under_bf16_autocast() -> None:
    model, fast = lora_pair(0.0, torch.bfloat16)
    x = torch.randn(4, 7, 16, dtype=torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want, got = forward_backward(model, x), forward_backward(fast, x)
    for a, b in zip(want, got, strict=True):
        assert b.dtype == a.dtype  # LoRA gradients in fp32, activations in bf16
        assert (a.float() - b.float()).norm() <= 0.02 * a.float().norm()


def test_fused_lora_steps_aside_when_adapters_are_disabled() -> None:
    model, fast = lora_pair(0.0, torch.float32)
    x = torch.randn(2, 16)
    with fast.disable_adapter():
        base = fast(x)
    with model.disable_adapter():
        assert torch.allclose(model(x), base)
    assert not torch.allclose(fast(x), base)  # the adapter is back on
    assert torch.allclose(fast(x), model(x), atol=1e-5)


@pytest.mark.parametrize("grad", [True, False])
def test_linear_cross_entropy_matches_cross_entropy(
    grad: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fused, "loss_chunk_rows", lambda vocab: 7)  # several chunks
    torch.manual_seed(0)
    hidden = torch.randn(30, 12, requires_grad=grad)
    weight = torch.randn(50, 12)
    targets = torch.randint(0, 50, (30,))
    logits = hidden @ weight.t()
    targets[::2] = logits[::2].argmax(dim=-1)  # half the rows answered right
    want = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
    hits = torch.zeros(30, dtype=torch.bool)
    got = linear_cross_entropy_sum(hidden, weight, targets, hits)
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    assert torch.equal(hits, logits.argmax(dim=-1) == targets)
    assert hits[::2].all() and 0 < hits.sum() < 30
    if grad:
        (want_grad,) = torch.autograd.grad(want * 0.5, hidden)
        (got_grad,) = torch.autograd.grad(got * 0.5, hidden)
        assert torch.allclose(want_grad, got_grad, atol=1e-5)


def test_linear_cross_entropy_in_bf16_is_close() -> None:
    torch.manual_seed(0)
    hidden = torch.randn(64, 32, dtype=torch.bfloat16, requires_grad=True)
    weight = (torch.randn(1000, 32) * 0.2).to(torch.bfloat16)
    targets = torch.randint(0, 1000, (64,))
    logits = hidden.float() @ weight.float().t()
    want = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
    (want_grad,) = torch.autograd.grad(want, hidden)
    got = linear_cross_entropy_sum(hidden, weight, targets)
    (got_grad,) = torch.autograd.grad(got, hidden)
    assert got.item() == pytest.approx(want.item(), rel=1e-3)
    assert (got_grad.float() - want_grad).norm() <= 0.01 * want_grad.norm()


def test_fused_training_step_matches_unfused(model_cache: Path) -> None:
    """The built-in model with LoRA: the same loss and LoRA gradients either way."""
    model_dir = model_cache / "builtin-tiny-v2"
    tokenizer = load_tokenizer(model_dir)
    torch.manual_seed(0)
    base = load_causal_lm(model_dir, dtype=torch.float32, device="cpu")
    model = get_peft_model(
        base, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
    )
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.02)
    fast = copy.deepcopy(model)
    assert fuse_lora(fast) > 0
    assert enable_varlen(model) and enable_varlen(fast)
    examples, _ = encode_pairs(tokenizer, training_pairs()[:5], 512)
    (batch,) = micro_batches(examples, row_tokens=512, micro_batch_tokens=4096, pad_id=0, flat=True)

    def loss_and_grads(m: torch.nn.Module) -> tuple[float, list[torch.Tensor]]:
        loss = answer_loss_sum(m, batch)
        loss.backward()
        return loss.item(), [p.grad for p in m.parameters() if p.requires_grad]  # type: ignore[misc]

    want_loss, want_grads = loss_and_grads(model)
    got_loss, got_grads = loss_and_grads(fast)
    assert got_loss == pytest.approx(want_loss, rel=1e-5)
    for want, got in zip(want_grads, got_grads, strict=True):  # fp32, summed in another order
        assert (want - got).norm() <= 1e-4 * want.norm()


def test_trainable_base_parameters_keep_peft_forward_and_the_unfused_loss() -> None:
    torch.manual_seed(0)
    model = get_peft_model(TwoLayers(), LoraConfig(r=4, target_modules=["up", "down"], bias="all"))
    # `up`'s bias trains (the fused layer would drop its gradient); `down` has no bias.
    assert fuse_lora(model) == 1
    weight = torch.randn(50, 12, requires_grad=True)
    with pytest.raises(ValueError, match="frozen"):
        linear_cross_entropy_sum(torch.randn(3, 12), weight, torch.tensor([1, 2, 3]))


def test_a_hopeless_target_gives_a_finite_loss_and_the_right_gradient() -> None:
    hidden = torch.tensor([[1.0, 0.0]], requires_grad=True)
    weight = torch.tensor([[200.0, 0.0], [0.0, 0.0]])  # target 1 trails by 200 nats
    loss = linear_cross_entropy_sum(hidden, weight, torch.tensor([1]))
    assert torch.isfinite(loss) and loss.item() > 80
    loss.backward()
    want = torch.softmax(hidden.detach() @ weight.t(), -1) - torch.tensor([[0.0, 1.0]])
    assert torch.allclose(hidden.grad, want @ weight)  # type: ignore[arg-type]


@pytest.mark.parametrize("grad", [True, False], ids=["training", "evaluation"])
def test_ignored_rows_add_no_loss_and_no_gradient(grad: bool) -> None:
    """Flat batches pad the LM head's rows to a bucket with IGNORE targets (data.py)."""
    from app.ml.fused import IGNORE

    torch.manual_seed(0)
    weight = torch.randn(50, 16)
    real = torch.randn(7, 16)
    targets = torch.randint(0, 50, (7,))
    padded = torch.cat([real, torch.randn(9, 16)]).requires_grad_(grad)
    padded_targets = torch.cat([targets, torch.full((9,), IGNORE)])
    plain = real.clone().requires_grad_(grad)
    with torch.set_grad_enabled(grad):
        want = linear_cross_entropy_sum(plain, weight, targets)
        got = linear_cross_entropy_sum(padded, weight, padded_targets)
    assert got.item() == pytest.approx(want.item(), rel=1e-5)
    if grad:
        got.backward(), want.backward()
        assert padded.grad is not None and plain.grad is not None
        assert torch.allclose(padded.grad[:7], plain.grad, atol=1e-6)
        assert not padded.grad[7:].any()


def test_fused_lora_over_a_4bit_base_matches_peft() -> None:
    """A 4-bit (NF4) base is dequantized for each matmul, as bitsandbytes' own layer does."""
    bnb = pytest.importorskip("bitsandbytes")
    torch.manual_seed(0)
    dense = TwoLayers()
    quantized = TwoLayers()
    for name in ("up", "down"):
        layer = getattr(dense, name)
        four_bit = bnb.nn.Linear4bit(
            layer.in_features,
            layer.out_features,
            bias=layer.bias is not None,
            compute_dtype=torch.float32,
            quant_type="nf4",
            compress_statistics=True,
        )
        four_bit.weight = bnb.nn.Params4bit(
            layer.weight.data, requires_grad=False, quant_type="nf4", compress_statistics=True
        )
        if layer.bias is not None:
            four_bit.bias = torch.nn.Parameter(layer.bias.data.clone(), requires_grad=False)
        setattr(quantized, name, four_bit.to("cpu"))  # quantized on the move
    model = get_peft_model(quantized, LoraConfig(r=4, lora_alpha=8, target_modules=["up", "down"]))
    for name, param in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.5)
    fast = copy.deepcopy(model)
    assert fuse_lora(fast) == 2
    x = torch.randn(3, 5, 16)
    for want, got in zip(forward_backward(model, x), forward_backward(fast, x), strict=True):
        assert torch.allclose(want, got, atol=1e-4), (want - got).abs().max()
