"""Two hand-fused training ops, each one autograd node where eager PyTorch makes many.

Measured on the benchmark shapes (docs/benchmarks.md), each is exact to bf16 rounding
(tests/ml/test_fused.py compares values and gradients with the unfused ops):

- `fuse_lora`: a LoRA linear layer as base matmul + rank-r update in one function. peft's
  own forward casts the activations to the fp32 LoRA weights' dtype (a full copy), autocast
  casts them back (another), then scales and adds the update in separate passes, each with
  its own backward. Here the rank-r update is accumulated into the base output in place
  (`addmm_`), in the activations' dtype, and the backward is four matmuls.
- `linear_cross_entropy_sum`: the LM head and the cross-entropy at answer positions. The
  unfused path makes fp32 logits, log-softmax, a zero-filled gradient and casts, each a
  pass over answers x vocabulary (151,936 wide for Qwen). Here the gradient is computed in
  the forward pass, a chunk of rows at a time: logits, softmax (accumulated in fp32 inside
  the kernel), minus one at the target, times the head weight.
"""

import types
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from app.ml.planner import loss_chunk_rows

IGNORE = -100  # a target that is not trained on (cross_entropy's ignore_index)


class _LoraLinear(torch.autograd.Function):
    """y = x W^T + b + s (x_lora A^T) B^T, with W and b frozen.

    `dequantize`, for a 4-bit base: makes W from the packed `weight` for the forward and
    again for the backward, so the dense weight is never kept between them."""

    @staticmethod
    def forward(
        ctx: Any,
        x: Tensor,
        x_lora: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        lora_a: Tensor,
        lora_b: Tensor,
        scaling: float,
        dequantize: Callable[[], Tensor] | None = None,
    ) -> Tensor:
        dense = weight if dequantize is None else dequantize()
        dtype = dense.dtype
        rows = x.reshape(-1, x.shape[-1]).to(dtype)
        rows_lora = rows if x_lora is x else x_lora.reshape(-1, x.shape[-1]).to(dtype)
        a, b = lora_a.to(dtype), lora_b.to(dtype)
        with torch.autocast(x.device.type, enabled=False):
            down = rows_lora @ a.t()
            out = rows @ dense.t() if bias is None else torch.addmm(bias.to(dtype), rows, dense.t())
            out.addmm_(down, b.t(), alpha=scaling)
        ctx.save_for_backward(rows_lora, down, weight, a, b)
        ctx.scaling = scaling
        ctx.dequantize = dequantize
        ctx.same_input = x_lora is x
        ctx.input_shape, ctx.input_dtype = x.shape, x.dtype
        return out.view(*x.shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        rows_lora, down, weight, a, b = ctx.saved_tensors
        s = ctx.scaling
        g = grad_out.reshape(-1, grad_out.shape[-1]).to(a.dtype)
        g_down = g @ b  # [tokens, r]
        grad_a = (g_down.t() @ rows_lora).mul_(s)
        grad_b = (g.t() @ down).mul_(s)
        grad_x = grad_x_lora = None
        needs_x, needs_x_lora = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if needs_x:
            weight = weight if ctx.dequantize is None else ctx.dequantize()
        if ctx.same_input and needs_x:
            grad_x = (g @ weight).addmm_(g_down, a, alpha=s)
        else:
            if needs_x:
                grad_x = g @ weight
            if needs_x_lora:
                grad_x_lora = (g_down @ a).mul_(s).view(ctx.input_shape).to(ctx.input_dtype)
        if grad_x is not None:
            grad_x = grad_x.view(ctx.input_shape).to(ctx.input_dtype)
        grads = (grad_x, grad_x_lora, None, None, grad_a.to(a.dtype), grad_b.to(b.dtype))
        return (*grads, None, None)


def _dequantizer(base: Any) -> Callable[[], Tensor] | None:
    """For a 4-bit base layer: a function that makes its dense weight in the compute
    precision (what bitsandbytes' own forward does for each matmul)."""
    import bitsandbytes as bnb

    weight = base.weight
    return lambda: bnb.functional.dequantize_4bit(weight.data, weight.quant_state).to(
        base.compute_dtype or torch.float32
    )


def _fused_forward(self: Any, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    if self.disable_adapters or self.merged or args or kwargs:
        return self._unfused_forward(x, *args, **kwargs)
    (name,) = self.active_adapters
    base = self.base_layer
    out: Tensor = _LoraLinear.apply(
        x,
        self.lora_dropout[name](x),  # nn.Identity when dropout is 0: the same tensor
        base.weight,
        base.bias,
        self.lora_A[name].weight,
        self.lora_B[name].weight,
        self.scaling[name],
        self._dequantize,
    )
    return out


def fuse_lora(model: torch.nn.Module) -> int:
    """Route plain LoRA linear layers through `_LoraLinear`; returns how many.

    A LoRA layer over a plain linear layer or a 4-bit one (bitsandbytes' NF4, dequantized
    for each matmul as bitsandbytes does) is fused. Layers peft gives a variant (DoRA and
    others), several adapters, 8-bit bases (LLM.int8 quantizes the activations too: the
    same ops as serving keep the same answers) or trainable base parameters keep peft's
    own forward, as do calls with extra arguments (mixed-adapter batches).
    """
    from peft.tuners.lora.layer import LoraLayer

    fused = 0
    for module in model.modules():
        if not isinstance(module, LoraLayer) or hasattr(module, "_unfused_forward"):
            continue
        base = module.get_base_layer()
        four_bit = type(base).__name__ == "Linear4bit" and type(base).__module__.startswith(
            "bitsandbytes"
        )
        if (
            len(module.active_adapters) != 1
            or getattr(module, "lora_variant", None)
            or not (type(base) is torch.nn.Linear or four_bit)
            or any(p.requires_grad for p in base.parameters())  # bias="all" trains biases
        ):
            continue
        # Per instance, so peft's class and any other model are untouched.
        object.__setattr__(module, "_unfused_forward", module.forward)
        object.__setattr__(module, "_dequantize", _dequantizer(base) if four_bit else None)
        object.__setattr__(module, "forward", types.MethodType(_fused_forward, module))
        fused += 1
    return fused


class _LinearCrossEntropySum(torch.autograd.Function):
    """sum_i CE(hidden_i W^T, target_i); the gradient is made in forward, chunk by chunk."""

    @staticmethod
    def forward(
        ctx: Any, hidden: Tensor, weight: Tensor, targets: Tensor, hits: Tensor | None
    ) -> Tensor:
        w = weight.to(hidden.dtype)
        grad = torch.empty_like(hidden)
        total = torch.zeros((), dtype=torch.float32, device=hidden.device)
        chunks = _chunks(hidden, w.shape[0])
        # Two buffers for every chunk: the same two blocks of the heap each time, not fresh
        # ones that land wherever the heap has room (and fault pages in when it has none).
        most_rows = max((rows.shape[0] for _, rows in chunks), default=0)
        logits_room = hidden.new_empty(most_rows, w.shape[0])
        probs_room = torch.empty_like(logits_room)
        with torch.autocast(hidden.device.type, enabled=False):
            for start, rows in chunks:
                n, end = rows.shape[0], start + rows.shape[0]
                target = targets[start:end]
                ignored = target == IGNORE  # padding rows (data.collate_flat): no loss, no grad
                target = target.masked_fill(ignored, 0)
                logits = torch.mm(rows, w.t(), out=logits_room[:n])
                # fp32 accumulation inside the kernel
                probs = torch.softmax(logits, dim=-1, out=probs_room[:n])
                index = torch.arange(probs.shape[0], device=probs.device)
                picked = probs[index, target]
                # A probability that underflows to 0 would make the loss inf (the gradient
                # is fine): cap each token's loss at -log(tiny) ≈ 87 nats instead.
                losses = -picked.float().clamp_min(torch.finfo(torch.float32).tiny).log()
                total += losses.masked_fill(ignored, 0).sum()
                probs[index, target] = picked - 1  # d loss / d logits = softmax - one-hot
                if hits is not None:
                    # The target beats every other token: picked - 1 < 0 is out of the max.
                    # amax, not argmax: bf16 argmax is 20x slower (22 vs 1.1 ms a chunk of
                    # Qwen's head, 4% of a step); a tie counts as not learned.
                    hits[start:end] = picked > probs.amax(dim=-1)
                probs.masked_fill_(ignored[:, None], 0)
                torch.mm(probs, w, out=grad[start:end])
        ctx.save_for_backward(grad)
        return total

    @staticmethod
    def backward(ctx: Any, grad_total: Tensor) -> tuple[Tensor | None, ...]:
        (grad,) = ctx.saved_tensors
        return grad * grad_total, None, None, None  # bf16 result, fp32 scale


def _chunks(hidden: Tensor, vocab: int) -> list[tuple[int, Tensor]]:
    rows = loss_chunk_rows(vocab)
    return [(start, hidden[start : start + rows]) for start in range(0, hidden.shape[0], rows)]


def linear_cross_entropy_sum(
    hidden: Tensor, weight: Tensor, targets: Tensor, hits: Tensor | None = None
) -> Tensor:
    """Summed cross-entropy of `hidden @ weight.T` against `targets`, as one fused op.

    With `hits` (bool, one per row), also says which rows' most likely token is the target:
    free here, and what tells the loop that greedy decoding would give every answer right.
    The weight gets no gradient: callers with a trainable head use the unfused path.
    """
    if weight.requires_grad:
        raise ValueError("linear_cross_entropy_sum takes a frozen weight")
    if torch.is_grad_enabled() and hidden.requires_grad:
        out: Tensor = _LinearCrossEntropySum.apply(hidden, weight, targets, hits)
        return out
    total = torch.zeros((), dtype=torch.float32, device=hidden.device)
    w = weight.to(hidden.dtype)
    for start, rows in _chunks(hidden, w.shape[0]):
        logits = (rows @ w.t()).float()
        target = targets[start : start + rows.shape[0]]
        if hits is not None:
            hits[start : start + rows.shape[0]] = logits.argmax(dim=-1) == target
        total += torch.nn.functional.cross_entropy(
            logits, target, reduction="sum", ignore_index=IGNORE
        )
    return total
