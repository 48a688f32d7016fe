"""The training heap: a step reuses the pages the previous step freed; they go back after."""

import multiprocessing
import resource
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import psutil
import pytest
import torch
from peft import LoraConfig, get_peft_model

from app.ml.answer_loss import answer_loss_sum
from app.ml.data import encode_pairs, micro_batches
from app.ml.fused import linear_cross_entropy_sum
from app.ml.memory import _glibc, _keep_freed_memory, _malloc_trim, heap_kept_between_steps
from app.ml.models import load_causal_lm, load_tokenizer
from app.ml.varlen_attention import enable_varlen
from tests.conftest import cpu_plan, training_pairs

# The precision this CPU trains in: bf16 where it is native, else fp32 (bf16 emulated runs
# a matmul over Qwen's vocabulary in a second, where native bf16 takes milliseconds).
DTYPE = torch.bfloat16 if cpu_plan().precision == "bf16" else torch.float32

pytestmark = [
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or _glibc() is None, reason="glibc's malloc only"
    ),
    pytest.mark.slow,  # trains steps of a model
]


def test_training_steps_stop_page_faulting_with_the_heap_kept(model_cache: Path) -> None:
    model_dir = model_cache / "builtin-tiny-v2"
    tokenizer = load_tokenizer(model_dir)
    model = get_peft_model(
        load_causal_lm(model_dir, dtype=DTYPE, device="cpu"),
        LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"),
    )
    assert enable_varlen(model)
    examples, _ = encode_pairs(tokenizer, training_pairs(), 512)
    batches = [
        micro_batches(examples[i : i + 8], row_tokens=512, micro_batch_tokens=4096, pad_id=0)[0]
        for i in range(0, 24, 8)
    ]

    def faults_of_steps() -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for batch in batches:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=DTYPE == torch.bfloat16):
                answer_loss_sum(model, batch).backward()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    # glibc's starting thresholds (its adaptive ones depend on what this process did before)
    _keep_freed_memory(False)
    _malloc_trim()
    faults_of_steps()
    default = faults_of_steps()
    with heap_kept_between_steps() as kept:
        assert kept
        faults_of_steps()  # the heap grows to the largest step once
        steady = faults_of_steps()
        kept_rss = psutil.Process().memory_info().rss
    assert default > 1_000  # glibc's default: every step pages its activations in afresh
    assert steady < default / 5
    assert psutil.Process().memory_info().rss < kept_rss  # given back at the end


@pytest.mark.skipif(
    DTYPE != torch.bfloat16, reason="no native bf16 on this CPU: no job trains in it"
)
def test_the_fused_loss_over_qwens_vocabulary_reuses_the_kept_heap() -> None:
    """Each chunk of 151,936-wide logits stays under glibc's mmap ceiling (planner.py): a
    chunk over it is fresh pages every time, ~57,000 faults a step on the 0.5B shape.
    Counted in a process of its own, as a job's training child is: the test process's
    other threads (left by earlier tests) fault too, and the count is the process's."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as child:
        # over the ceiling, each call took 41,000 faults
        assert child.submit(fused_loss_faults).result(timeout=300) < 1_000


def fused_loss_faults() -> int:
    """The fewest page faults of three fused losses over Qwen's vocabulary, once the heap
    has grown to fit (min: a stray allocation can land in the way now and then)."""
    vocab = 151_936
    weight = torch.randn(vocab, 64, dtype=torch.bfloat16)
    hidden = torch.randn(300, 64, dtype=torch.bfloat16, requires_grad=True)
    targets = torch.randint(0, vocab, (300,))

    def faults_of_loss() -> int:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        linear_cross_entropy_sum(hidden, weight, targets).backward()
        hidden.grad = None
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    with heap_kept_between_steps():
        for _ in range(3):  # the heap grows to fit
            faults_of_loss()
        return min(faults_of_loss() for _ in range(3))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_malloc_figures_count_what_is_handed_out_within_what_is_held() -> None:
    from app.ml.memory import malloc_figures

    before = malloc_figures()
    assert before is not None and 0 < before.in_use <= before.held
    block = bytearray(64 * 2**20)  # over glibc's mmap threshold: a block of its own
    during = malloc_figures()
    assert during is not None and during.in_use - before.in_use >= 64 * 2**20
    del block
