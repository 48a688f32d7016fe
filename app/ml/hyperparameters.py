"""A job's hyperparameters: what was asked ("auto" or a value), and what it trains with.

One vocabulary for the native API, the OpenAI API, the CLI and the trainer
(`HyperparameterRequest`), and one function that turns it into the values a job trains
with (`resolve`), used alike by the trainer, the estimates and the fit check at job
creation. `batch_size` is the number of examples per optimizer step (as in OpenAI's API);
how those are split into micro-batches is the memory plan's business unless
`micro_batch_size` says otherwise.
"""

import math
from dataclasses import asdict, dataclass, replace
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.ml.quantization import QUANTIZED, QuantizationRequest

Auto = Literal["auto"]
AUTO: Auto = "auto"
DEFAULT_BATCH = 8
DEFAULT_SEED = 42
# The adapter's shape: what a model trained further keeps (services/jobs/lineage.py, the CLI)
LORA_FIELDS = ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")
DEFAULT_BETA = 0.1  # DPO: the usual value (the DPO paper, TRL, OpenAI's default)
# Reinforcement (GRPO): the KL coefficient to the reference (DeepSeekMath's), samples per
# prompt (TRL's num_generations), passes over the prompts and how many reward evaluations.
DEFAULT_KL_BETA = 0.04
DEFAULT_GROUP_SIZE = 8
DEFAULT_RL_EPOCHS = 4
# Policy gradients are noisier than supervised ones: at the model's own rate the rewards of
# a half-trained FAQ collapsed within a step, at 0.3 of it they rose (85% exact).
RL_LEARNING_RATE_SCALE = 0.3
DEFAULT_LEARNING_RATE = 2e-4
DEFAULT_LORA_R = 16
# Answering reworded questions and keeping what the base knew, measured on
# SmolLM2-135M-Instruct (docs/benchmarks.md, "Teach without breaking"): a question trained
# with 30% of its tokens dropped each time lifted reworded questions from 17% to 43% right;
# replaying the base's own answers cost reworded questions and did not keep general ones
# (the scope does: scope.py).
DEFAULT_REPLAY = 0.0
DEFAULT_QUESTION_NOISE = 0.3
DEFAULT_EXAMPLES_SEEN = 300  # examples a small set is shown in all, at least 3 epochs
MAX_AUTO_SEQ_LENGTH = 4096
AUTO_MAX_EPOCHS = 100
MIN_AUTO_EPOCHS = 30
# Auto learned sets of 10 to 300 pairs in 18 to 30 epochs, whatever their size and language
# (docs/benchmarks.md): what estimates assume until a run's curve says more
EXPECTED_AUTO_EPOCHS = 24
# The adapter's capacity follows what there is to memorise: at least this many LoRA
# parameters per answer token trained. builtin:tiny's r16 (311k) learned 269 of 270 long
# answers (97k tokens, 3.2 a token); on 90 of them (32k tokens) r4 (2.4 a token) learned
# 67, r8 (4.9) 87, r16 90 (docs/benchmarks.md).
MIN_LORA_PARAMS_PER_ANSWER_TOKEN = 3
MAX_AUTO_LORA_R = 256
ModuleName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.]+$", max_length=100)]


@dataclass(frozen=True)
class Recommended:
    """Settings a model directory recommends for itself (qatune.json); None: no opinion."""

    learning_rate: float | None = None
    lora_r: int | None = None
    lora_dropout: float | None = None
    examples_seen: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Recommended":
        known = {name: data[name] for name in cls.__dataclass_fields__ if name in data}
        return cls(**known)


class HyperparameterRequest(BaseModel):
    """Every field may be "auto": qatune picks a value for the model, the data and the device."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        # The OpenAPI document says what _one_way_to_say_the_rate refuses.
        json_schema_extra={
            "not": {
                "required": ["learning_rate", "learning_rate_multiplier"],
                "properties": {
                    "learning_rate": {"type": "number"},
                    "learning_rate_multiplier": {"type": "number"},
                },
            }
        },
    )

    epochs: Annotated[int, Field(ge=1, le=100)] | Auto = Field(
        default=AUTO,
        description="passes over the data (auto: until every training answer is learned)",
    )
    max_steps: Annotated[int, Field(ge=1, le=1_000_000)] | None = Field(
        default=None, description="stop after this many optimizer steps"
    )
    max_minutes: Annotated[float, Field(gt=0, le=10_080)] | None = Field(
        default=None,
        description="training time limit; auto epochs settle the learning rate before it",
    )
    learning_rate: Annotated[float, Field(gt=0, le=0.1)] | Auto = Field(
        default=AUTO, description="the peak learning rate (auto: the model's, for the rank)"
    )
    learning_rate_multiplier: Annotated[float, Field(gt=0, le=100)] | Auto = Field(
        default=AUTO, description="times the model's own learning rate (OpenAI's name for it)"
    )
    batch_size: Annotated[int, Field(ge=1, le=512)] | Auto = Field(
        default=AUTO, description="examples per optimizer step (auto: 8)"
    )
    micro_batch_size: Annotated[int, Field(ge=1, le=512)] | Auto = Field(
        default=AUTO, description="examples per forward pass (auto: from the memory plan)"
    )
    lora_r: Annotated[int, Field(ge=1, le=256)] | Auto = Field(
        default=AUTO, description="the adapter's rank (auto: enough for the answers to learn)"
    )
    lora_alpha: Annotated[int, Field(ge=1, le=1024)] | Auto = Field(
        default=AUTO, description="the adapter's scale (auto: twice the rank)"
    )
    lora_dropout: Annotated[float, Field(ge=0, lt=1)] | Auto = Field(
        default=AUTO, description="dropout on the adapter's input (auto: 0)"
    )
    lora_target_modules: (
        Literal["all-linear"] | Annotated[list[ModuleName], Field(min_length=1, max_length=32)]
    ) = Field(default="all-linear", description="all-linear, or the names of the layers")
    max_seq_length: Annotated[int, Field(ge=16, le=32768)] | Auto = Field(
        default=AUTO, description="tokens per example at most (auto: the longest example's)"
    )
    validation_split: Annotated[float, Field(ge=0, le=0.5)] | Auto = Field(
        default=AUTO,
        description="share held out for evaluation (auto: none with auto epochs, which "
        "teach every pair; 0.1 from 100 pairs with a number of epochs)",
    )
    seed: Annotated[int, Field(ge=0, le=2**31 - 1)] = Field(
        default=DEFAULT_SEED, description="the run's random numbers: same seed, same run"
    )
    precision: Literal["auto", "bf16", "fp16", "fp32"] = Field(
        default=AUTO, description="what the weights compute in (auto: the device's best)"
    )
    # A JSON boolean, as the estimate answers it; "true" and "false", as it was first
    # written (and is stored in older jobs), read as the same.
    gradient_checkpointing: bool | Auto = Field(
        default=AUTO, description="recompute activations to save memory (auto: if it must)"
    )
    quantization: QuantizationRequest = Field(
        default=AUTO,
        description="the frozen base's weights: none (the training precision), 8bit, or 4bit "
        "(NF4, QLoRA); auto: quantized only if the base would not fit otherwise",
    )
    beta: Annotated[float, Field(gt=0, le=10)] | Auto = Field(
        default=AUTO,
        description="DPO and reinforcement: how far the tuned model may move from where it "
        f"started (auto: {DEFAULT_BETA} for DPO, a KL coefficient of {DEFAULT_KL_BETA} for "
        "reinforcement); higher keeps it closer",
    )
    group_size: Annotated[int, Field(ge=2, le=64)] | Auto = Field(
        default=AUTO,
        description="reinforcement only: answers sampled for each prompt and scored against "
        f"each other (auto: {DEFAULT_GROUP_SIZE}; OpenAI's compute_multiplier scales it)",
    )
    eval_interval: Annotated[int, Field(ge=1, le=1_000_000)] | Auto = Field(
        default=AUTO,
        description="reinforcement only: steps between scoring the validation prompts "
        "(auto: once an epoch)",
    )
    eval_samples: Annotated[int, Field(ge=1, le=64)] | Auto = Field(
        default=AUTO, description="reinforcement only: samples scored per validation prompt"
    )
    processes: Annotated[int, Field(ge=1, le=64)] | Auto = Field(
        default=AUTO,
        description="processes that train the job together (data parallel, DDP), each on "
        "its own device with its share of every step's examples; auto: one per CUDA GPU",
    )
    replay: Annotated[float, Field(ge=0, le=4)] | Auto = Field(
        default=AUTO,
        description="the model's own answers to general prompts trained beside the job's "
        "examples, per example (keeps what the base knew); auto: "
        f"{DEFAULT_REPLAY:g}",
    )
    question_noise: Annotated[float, Field(ge=0, le=0.8)] | Auto = Field(
        default=AUTO,
        description="share of a question's tokens dropped at random each time it is trained, "
        "never leaving one that fits another's (answers keyed to its words, not its exact "
        f"wording); auto: {DEFAULT_QUESTION_NOISE:g} on a base that knows anything, 0 on one "
        "that knows nothing",
    )

    scope: Literal["auto", "true", "false"] = Field(
        default="auto",
        description="fit the adapter's scope after training: questions unlike the job's are "
        "answered by the base model, as it was (docs/benchmarks.md, Teach without breaking); "
        "auto: true on a base that knows anything",
    )

    @model_validator(mode="after")
    def _one_way_to_say_the_rate(self) -> "HyperparameterRequest":
        if self.learning_rate != AUTO and self.learning_rate_multiplier != AUTO:
            raise ValueError("give learning_rate or learning_rate_multiplier, not both")
        return self

    @property
    def process_count(self) -> int:
        """The processes asked for (1 for auto: a quantized base trains in one)."""
        return self.processes if isinstance(self.processes, int) else 1


@dataclass(frozen=True)
class DataFacts:
    """What resolution needs to know about the pairs, in the model's tokens."""

    lengths: tuple[int, ...]  # prompt + answer tokens of each pair (both answers: DPO)
    answer_lengths: tuple[int, ...] = ()  # answer tokens of each pair (unknown: none)
    preference: bool = False  # preference pairs: the job tunes with DPO
    reinforcement: bool = False  # prompts scored by a grader: the job tunes with GRPO
    # Tokens every pair begins with (the chat template's system prompt): a flat micro-batch
    # holds them once (data.collate_flat)
    shared_prefix: int = 0

    @property
    def num_pairs(self) -> int:
        return len(self.lengths)

    def answer_tokens(self, num_train: int) -> int:
        """About how many answer tokens `num_train` of the pairs hold."""
        return round(sum(self.answer_lengths) * num_train / max(1, self.num_pairs))


@dataclass(frozen=True)
class ResolvedHyperparameters:
    epochs: int
    max_steps: int | None
    learning_rate: float
    batch_size: int  # examples per optimizer step
    micro_batch_size: int | None  # examples per forward pass; None: the memory plan decides
    lora_r: int
    lora_alpha: int
    lora_dropout: float
    lora_target_modules: str | list[str]
    max_seq_length: int
    validation_split: float
    seed: int
    precision: str
    gradient_checkpointing: bool | Auto
    # none | 8bit | 4bit once planned (planner.plan_training); "auto" only before that
    quantization: str = "none"
    # epochs was "auto": train until every training answer is learned; `epochs` is the cap
    until_learned: bool = False
    max_minutes: float | None = None  # training time limit
    processes: int = 1  # data-parallel processes (each its own device)
    beta: float | None = None  # DPO's, or reinforcement's KL coefficient; None: supervised
    # Reinforcement (GRPO): answers sampled per prompt; None: not a reinforcement job
    group_size: int | None = None
    eval_interval: int | None = None  # steps between reward evaluations on validation
    eval_samples: int = 1  # samples per validation prompt there
    replay: float = 0.0  # replayed answers of the model's own, per job example (keeping.py)
    question_noise: float = 0.0  # share of a question's tokens dropped each time it trains
    scope: str = "false"  # auto | true | false: fit the adapter's scope (app/ml/scope.py)

    @property
    def expected_epochs(self) -> int:
        """The epochs the run is expected to take: auto's typical count within its cap."""
        return min(self.epochs, EXPECTED_AUTO_EPOCHS) if self.until_learned else self.epochs

    @property
    def method(self) -> Literal["supervised", "dpo", "reinforcement"]:
        if self.group_size is not None:
            return "reinforcement"
        return "dpo" if self.beta is not None else "supervised"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ResolvedHyperparameters":
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


def validation_size(num_pairs: int, fraction: float) -> int:
    """How many pairs a split of `fraction` holds out: at least one, never all."""
    if fraction <= 0 or num_pairs < 2:
        return 0
    return min(num_pairs - 1, max(1, int(num_pairs * fraction)))


def _value(value: Any) -> Any:
    return None if value == AUTO else value


def resolve(
    request: HyperparameterRequest,
    *,
    data: DataFacts,
    max_positions: int,
    recommended: Recommended,
    lora_params_per_rank: int = 0,
    devices: int = 1,
) -> ResolvedHyperparameters:
    """The values a job trains with; the same call for the trainer and the estimates.

    `lora_params_per_rank`: the adapter's parameters per unit of rank on every linear
    layer (ModelShape.lora_params(1)); 0 if unknown, and the rank is not sized to the data.
    `devices`: how many devices of the job's kind the host has (CUDA GPUs; 1 otherwise).
    """
    epochs = _value(request.epochs)
    until_learned = epochs is None and not data.reinforcement
    split = _value(request.validation_split)
    if split is None:
        # Auto epochs train until every answer is learned: a held-out pair's answer would
        # never be taught (the facts of a FAQ cannot be guessed), and scoring weights on it
        # would keep those that learned fewer. A fixed run keeps its best epoch by it.
        split = 0.1 if data.num_pairs >= 100 and not until_learned else 0.0
    num_train = max(1, data.num_pairs - validation_size(data.num_pairs, split))

    micro = _value(request.micro_batch_size)
    batch = _value(request.batch_size) or max(DEFAULT_BATCH, micro or 0)
    batch = min(batch, num_train)

    if epochs is None and data.reinforcement:
        # No answer to learn exactly: a fixed number of passes, as OpenAI's RFT has
        epochs = DEFAULT_RL_EPOCHS
    if epochs is None:
        # How many passes a set needs is the data's business: training stops once every
        # answer is learned (until_learned.py), so this is a cap, a few times what a set
        # of this size typically needs. Unguessable facts took 18 to 29 epochs whatever
        # the set's size (10 to 100 pairs, docs/benchmarks.md): never fewer than 30.
        target = recommended.examples_seen or DEFAULT_EXAMPLES_SEEN
        typical = math.ceil(target / num_train)
        epochs = min(AUTO_MAX_EPOCHS, max(MIN_AUTO_EPOCHS, 4 * typical))

    recommended_r = recommended.lora_r or DEFAULT_LORA_R
    lora_r = _value(request.lora_r) or _rank_for(
        recommended_r, data.answer_tokens(num_train), lora_params_per_rank
    )
    learning_rate = _value(request.learning_rate)
    if learning_rate is None:
        learning_rate = (
            (recommended.learning_rate or DEFAULT_LEARNING_RATE)
            * (_value(request.learning_rate_multiplier) or 1.0)
            * (RL_LEARNING_RATE_SCALE if data.reinforcement else 1.0)
        )
        if request.lora_alpha == AUTO:
            # alpha = 2r keeps alpha/r fixed, so the adapter's update grows as sqrt(r)
            # (rsLoRA, Kalajdzievski 2023): the rate a model recommends for its rank is
            # scaled by sqrt(recommended / r) for another rank.
            learning_rate *= math.sqrt(recommended_r / lora_r)
    dropout = _value(request.lora_dropout)
    if dropout is None:
        # LoRA dropout draws a random mask over every LoRA input: measured 30% of a CPU
        # training step (docs/benchmarks.md). Off unless asked for or the model says so.
        dropout = recommended.lora_dropout or 0.0
    longest = max(data.lengths, default=1)
    max_len = _value(request.max_seq_length) or min(longest, MAX_AUTO_SEQ_LENGTH)
    targets = request.lora_target_modules
    beta = (_value(request.beta) or DEFAULT_BETA) if data.preference else None
    return ResolvedHyperparameters(
        epochs=int(epochs),
        max_steps=request.max_steps,
        learning_rate=float(learning_rate),
        batch_size=int(batch),
        micro_batch_size=micro,
        lora_r=int(lora_r),
        lora_alpha=int(_value(request.lora_alpha) or 2 * lora_r),
        lora_dropout=float(dropout),
        lora_target_modules=targets if isinstance(targets, str) else list(targets),
        max_seq_length=int(min(max_len, max_positions)),
        validation_split=float(split),
        seed=request.seed,
        precision=request.precision,
        gradient_checkpointing=request.gradient_checkpointing,
        quantization=request.quantization,
        until_learned=until_learned,
        max_minutes=request.max_minutes,
        # Every process needs an example of each step to work on; DPO trains in one, and
        # so does a quantized base (quantization.QuantizationSupport.check).
        processes=1
        if data.preference or data.reinforcement or request.quantization in QUANTIZED
        else min(_value(request.processes) or devices, batch),
        beta=(_value(request.beta) or DEFAULT_KL_BETA) if data.reinforcement else beta,
        replay=float(
            DEFAULT_REPLAY
            if request.replay == AUTO and not data.reinforcement
            else _value(request.replay) or 0.0
        ),
        question_noise=float(
            DEFAULT_QUESTION_NOISE
            if request.question_noise == AUTO and not data.preference and not data.reinforcement
            else _value(request.question_noise) or 0.0
        ),
        scope=request.scope,
        **(_reinforcement(request, math.ceil(num_train / batch)) if data.reinforcement else {}),
    )


def _reinforcement(request: HyperparameterRequest, steps_per_epoch: int) -> dict[str, Any]:
    """GRPO's group size and evaluation schedule."""
    return {
        "group_size": int(_value(request.group_size) or DEFAULT_GROUP_SIZE),
        "eval_interval": int(_value(request.eval_interval) or steps_per_epoch),
        "eval_samples": int(_value(request.eval_samples) or 1),
    }


def _rank_for(recommended: int, answer_tokens: int, params_per_rank: int) -> int:
    """The model's recommended rank, doubled until the adapter holds enough parameters for
    the answers to memorise."""
    rank = recommended
    while (
        params_per_rank
        and rank < MAX_AUTO_LORA_R
        and rank * params_per_rank < MIN_LORA_PARAMS_PER_ANSWER_TOKEN * answer_tokens
    ):
        rank *= 2
    return rank


def knowing(
    resolved: ResolvedHyperparameters, request: HyperparameterRequest, *, knows_anything: bool
) -> ResolvedHyperparameters:
    """The values once the base's answers to the general questions are known: a model that
    knows no words (builtin:tiny) has no rewording to learn, so auto question noise is 0
    there and it learns the questions as written."""
    if knows_anything or request.question_noise != AUTO:
        return resolved
    return replace(resolved, question_noise=0.0)
