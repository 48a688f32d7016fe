"""Which waiting requests may join the running batch: by rows and by KV-cache bytes."""

import time

import torch
from transformers import Qwen2Config

from app.ml.serving.kv_budget import KvBudget
from app.ml.serving.requests import EngineLimits, GenerationRequest, Sampling


def request(prompt: int, max_tokens: int) -> GenerationRequest:
    return GenerationRequest(
        [1] * prompt, None, Sampling(max_tokens=max_tokens), lambda e: None, time.monotonic()
    )


def test_bytes_per_token_are_every_layers_keys_and_values() -> None:
    config = Qwen2Config(  # Qwen2.5-7B: 28 layers, 4 KV heads of 128
        hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
        vocab_size=152064, max_position_embeddings=32768,
    )  # fmt: skip
    budget = KvBudget.for_model(config, torch.bfloat16, EngineLimits())
    assert budget.bytes_per_token == 2 * 28 * 4 * 128 * 2  # 57,344
    assert budget.context == 32768 and budget.max_rows == EngineLimits().max_batch


def test_a_request_joins_while_the_padded_batch_fits() -> None:
    budget = KvBudget(max_rows=32, budget_bytes=1000 * 100, bytes_per_token=100, context=4096)
    short = request(50, 50)  # reserves 100 tokens: ten such rows fill the budget
    assert budget.room_for([], short)
    assert budget.room_for([100] * 9, short)
    assert not budget.room_for([100] * 10, short)
    # rows are as long as the longest: one long newcomer makes every row long
    assert not budget.room_for([100] * 5, request(100, 100))
    assert budget.room_for([100] * 4, request(100, 100))
    assert budget.room_for([], request(5000, 5000))  # a lone request always runs
    assert budget.tokens(request(3000, 5000)) == 4096  # the context bounds a row


def test_the_row_count_bounds_too() -> None:
    budget = KvBudget(max_rows=2, budget_bytes=2**40, bytes_per_token=1, context=4096)
    assert budget.room_for([10], request(5, 5))
    assert not budget.room_for([10, 10], request(5, 5))
