"""Where a training loop is: what a checkpoint saves and a resumed run continues from."""

from dataclasses import dataclass, field


@dataclass
class LoopProgress:
    """Where the optimizer loop is: what a resumed run continues from."""

    step: int = 0
    losses: list[float] = field(default_factory=list)
    train_tokens: int = 0
    computed_tokens: int = 0
    seconds: float = 0.0  # training time so far, over every run of the job
    micro_batch_tokens: int | None = None  # after out-of-memory back-off, if any
    checkpointing: bool = False  # gradient checkpointing switched on by back-off
    settle_from: int | None = None  # auto epochs: the step the learning rate began to settle
    settle_steps: int = 0
    lr_scale: float = 1.0  # auto epochs: the learning rate's cuts on plateaus so far
    # Auto epochs: each epoch's share of answer tokens wrong (where the run is expected to
    # end), the share of the run shown so far, and the plateau's best (learned, token
    # accuracy, epoch): a resumed run estimates, shows and waits as the killed one would have
    token_errors: dict[int, float] = field(default_factory=dict)
    shown_share: float = 0.0
    plateau_best: tuple[int, float, int] = (-1, -1.0, 0)
    plateau_best_written: int = -1  # question noise: the most given to them as written
    drill: list[int] = field(default_factory=list)  # question noise: their places in the set
    # Auto epochs: the cap as raised for a run still learning, and where the rate's decay
    # to it began (step, factor)
    cap_steps: int | None = None
    decay_from: tuple[int, float] = (0, 1.0)
    # This run's tokens/s after its first WARM_UP_STEPS (new shapes' kernels, caches)
    steady_tokens_per_second: float | None = None
