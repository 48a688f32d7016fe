"""Runtime: what a qatune process is made of, built once by the app factory, the CLI and
the worker alike.

Each part is made on first use and then kept: the torch environment (set first, before
anything imports torch), the database (migrated), the storage paths, the JWT secret, the
one device plan of the process, the query service and the worker. A `qatune train` run
therefore never opens the database, and `qatune serve` decides the device once.
"""

from __future__ import annotations

import os
import time
from functools import cached_property
from typing import TYPE_CHECKING

from loguru import logger

from app.core.config import Settings
from app.core.disk import DiskState, disk_state
from app.core.password_work import PasswordWork, default_workers
from app.core.proof_of_work import Proofs
from app.core.security import load_or_create_secret
from app.core.storage import Storage
from app.core.throttle import LoginThrottle
from app.db.session import Database
from app.ml.device import Capabilities, DevicePlan
from app.ml.environment import TorchEnvironment

if TYPE_CHECKING:  # both import torch, which must wait until its environment is set
    from app.ml.query_service import QueryService
    from app.ml.serving.requests import EngineStats
    from app.ml.serving.vllm_backend import VllmOptions
    from app.services.accounts.face import Accounts
    from app.services.datasets.face import Datasets
    from app.services.evals.face import Evals
    from app.services.evals.graders import Graders
    from app.services.evals.runs import EvalRunner
    from app.services.exports.exporter import Exporter
    from app.services.jobs.face import Jobs
    from app.services.jobs.feed import JobFeed
    from app.services.operations.metrics import ServiceMetrics
    from app.services.serving.queries import Serving
    from app.worker.context import WorkerContext
    from app.worker.supervisor import Worker


class Runtime:
    def __init__(self, settings: Settings, *, capabilities: Capabilities | None = None) -> None:
        """`capabilities` replaces the probe of this machine (tests of the device policy)."""
        # Everything qatune writes (the database with its password hashes, datasets,
        # adapters, secrets, logs) is its owner's alone: files 0600, directories 0700.
        os.umask(0o077)
        self.settings = settings
        self.storage = Storage(settings.data_dir)
        self.torch_environment = TorchEnvironment(
            mps_fallback=settings.mps_fallback,
            mps_high_watermark_ratio=settings.mps_high_watermark_ratio,
            mps_low_watermark_ratio=settings.mps_low_watermark_ratio,
        )
        self.torch_environment.apply()
        self._capabilities = capabilities
        self.worker: Worker | None = None
        self.started_at = int(time.time())

    @cached_property
    def database(self) -> Database:
        data_dir = self.settings.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        data_dir.chmod(0o700)  # also when an earlier version made it world-readable
        database = Database.from_settings(self.settings)
        database.migrate()
        for name in ("qatune.db", "qatune.db-wal", "qatune.db-shm"):
            if (data_dir / name).exists():
                (data_dir / name).chmod(0o600)
        return database

    @cached_property
    def secret_key(self) -> str:
        if self.settings.secret_key:
            return self.settings.secret_key.get_secret_value()
        return load_or_create_secret(self.settings.data_dir / "secret_key")

    @cached_property
    def device_plan(self) -> DevicePlan:
        """This process's device, decided once (plan_this_machine)."""
        from app.ml.device_benchmark import plan_this_machine

        settings = self.settings
        return plan_this_machine(settings.device, settings.data_dir, self._capabilities)

    @cached_property
    def query_service(self) -> QueryService:
        from app.ml.query_service import QueryService
        from app.ml.serving.requests import EngineLimits

        return QueryService(
            device_plan=self.device_plan,
            model_cache_dir=self.storage.models_dir,
            offline=self.settings.offline,
            configured_models=tuple(self.settings.base_models),
            limits=EngineLimits(
                max_batch=self.settings.serve_max_batch,
                kv_cache_bytes=self.settings.serve_kv_memory_mb * 2**20,
                max_waiting=self.settings.serve_max_waiting,
                max_adapters=self.settings.query_cache_size,
                max_adapter_bytes=self.settings.serve_adapter_memory_mb * 2**20,
                merge_budget_bytes=self.settings.serve_merge_memory_mb * 2**20,
            ),
            timeout_seconds=self.settings.serve_timeout_seconds,
            vllm=self._vllm_options(),
        )

    def _vllm_options(self) -> VllmOptions | None:
        from app.ml.serving.vllm_backend import VllmOptions

        settings = self.settings
        if settings.serving_backend != "vllm":
            return None
        key = settings.vllm_api_key
        return VllmOptions(
            urls=tuple(settings.vllm_urls),
            api_key=key.get_secret_value() if key else None,
            python=settings.vllm_python,
            replicas=settings.vllm_replicas,
            max_lora_rank=settings.vllm_max_lora_rank,
            max_loras=settings.vllm_max_loras,
            start_seconds=settings.vllm_start_seconds,
            extra_args=settings.vllm_extra_args,
            kv_cache_bytes=settings.serve_kv_memory_mb * 2**20,
        )

    @cached_property
    def serving(self) -> Serving:
        from app.services.serving.queries import Serving

        return Serving(
            settings=self.settings,
            storage=self.storage,
            engines=self.query_service,
            exporter=self.exporter,
        )

    @cached_property
    def graders(self) -> Graders:
        from app.graders.sandbox.runner import PythonSandbox
        from app.services.evals.graders import Graders, sandbox_limits

        limits = sandbox_limits(self.settings)
        return Graders(self.serving, PythonSandbox(limits) if limits else None)

    @cached_property
    def eval_runner(self) -> EvalRunner:
        from app.services.evals.runs import EvalRunner

        return EvalRunner(self.database, self.storage, self.graders)

    # The faces the routes call, one a domain, with the parts above wired in.
    @cached_property
    def accounts(self) -> Accounts:
        from app.services.accounts.face import Accounts

        return Accounts(
            self.settings,
            self.storage,
            self.secret_key,
            self.password_work,
            self.login_throttle,
            self.sign_in_proofs,
            forget=lambda job: self.serving.forget(job),  # serving is made when needed
        )

    @cached_property
    def jobs(self) -> Jobs:
        from app.services.jobs.face import Jobs

        return Jobs(self.storage, self.settings, self.device_plan, self.graders)

    @cached_property
    def datasets(self) -> Datasets:
        from app.services.datasets.face import Datasets

        return Datasets(self.storage, self.settings)

    @cached_property
    def evals(self) -> Evals:
        from app.services.evals.face import Evals

        return Evals(self.storage, self.graders, self.eval_runner)

    @cached_property
    def exporter(self) -> Exporter:
        from app.ml.export.llama_cpp import default_converter_dir
        from app.services.exports.exporter import Exporter

        return Exporter(
            self.storage,
            self.settings.llama_cpp_dir or default_converter_dir(),
            configured_models=tuple(self.settings.base_models),
            offline=self.settings.offline,
            precision=self.device_plan.precision,
        )

    @cached_property
    def metrics(self) -> ServiceMetrics:
        from app.services.operations.metrics import ServiceMetrics, StateCollector

        def worker_alive() -> bool:
            return bool(self.worker and self.worker.alive)

        def slots() -> int:
            return self.worker.slots() if self.worker and self.worker.alive else 0

        return ServiceMetrics(
            StateCollector(self.database, self.serving_stats, worker_alive, slots, disk=self.disk)
        )

    def serving_stats(self) -> list[EngineStats]:
        """The engines loaded so far (asking never loads a model)."""
        return self.query_service.stats() if "query_service" in self.__dict__ else []

    def disk(self) -> DiskState:
        """The data directory's disk: how much room it has, against QATUNE_DISK_LOW_MB."""
        return disk_state(self.settings.data_dir, low_below_mb=self.settings.disk_low_mb)

    @cached_property
    def login_throttle(self) -> LoginThrottle:
        return LoginThrottle()

    @cached_property
    def password_work(self) -> PasswordWork:
        workers = self.settings.password_workers or default_workers()
        return PasswordWork(workers=workers, waiting=self.settings.password_queue)

    @cached_property
    def sign_in_proofs(self) -> Proofs:
        return Proofs(self.secret_key)

    def user_id_for_token(self, token: str) -> int:
        """The bearer's user id, or AuthError: for checks made before a request is read."""
        from app.services.accounts.auth import user_for_token

        with self.database.session() as session:
            return user_for_token(session, token, secret_key=self.secret_key).id

    @cached_property
    def job_feed(self) -> JobFeed:
        from app.services.jobs.feed import JobFeed

        return JobFeed(
            self.database, poll_seconds=0.5, max_per_user=self.settings.max_streams_per_user
        )

    def warm_up(self) -> None:
        """Before the first request: the default model exists and its tokenizer is loaded
        (the first POST /jobs took seconds to do it; a packaged model is read from its GGUF
        the first time, about 30 s, said in the log), then every object made so far is
        moved out of the garbage collector's reach.

        With torch and transformers loaded, a full collection walks a million objects and
        stalled every request for 130-240 ms, every few seconds under load; frozen, they
        are never walked again.
        """
        import gc

        from app.core.errors import QatuneError
        from app.ml.models import ModelUnavailable
        from app.ml.serving.requests import GenerationFailed
        from app.services.jobs.estimates import warm_up_model

        try:
            warm_up_model(
                self.settings.default_base_model, self.settings, self.device_plan.precision
            )
            if self.settings.serving_backend == "vllm":  # its servers take a minute to start
                self.query_service.engine(self.settings.default_base_model)
        except (ModelUnavailable, QatuneError, OSError) as exc:  # not here: the job will say
            logger.info("Default model not loaded at start: {}", exc)
        except GenerationFailed as exc:  # vLLM's servers cannot start: each request says so
            logger.error("Serving cannot start: {}", exc)
        gc.freeze()

    def worker_context(self) -> WorkerContext:
        from app.worker.context import WorkerContext

        return WorkerContext(
            settings=self.settings,
            database=self.database,
            storage=self.storage,
            device_plan=self.device_plan,
            torch_environment=self.torch_environment,
            free_device_for_training=self.free_device_for_training,
            model_ready=self.model_ready,
        )

    def start_worker(self) -> Worker:
        from app.worker.supervisor import Worker

        context = self.worker_context()
        if self.settings.executor == "ray":  # Ray is an extra: imported only when asked for
            from app.worker.ray_executor import RayWorker

            self.worker = RayWorker(context)
        else:
            self.worker = Worker(context)
        self.worker.start()
        return self.worker

    def model_ready(self, job_id: int) -> None:
        """QATUNE_VLLM_LOAD=at_once: a succeeded job's adapter goes into vLLM now, on a
        thread of its own (loading waits for the servers to start)."""
        settings = self.settings
        if settings.serving_backend != "vllm" or settings.vllm_load != "at_once":
            return
        import threading

        from app.db.models import Job

        def load() -> None:
            try:
                with self.database.session() as session:
                    job = session.get(Job, job_id)
                    served = self.serving.job_model(job) if job is not None else None
            except Exception as exc:  # noqa: BLE001  (deleted meanwhile, …: asking will say)
                logger.warning("Job {}'s model not loaded into vLLM at once: {}", job_id, exc)
                return
            if served is not None:
                self.serving.preload(served)

        threading.Thread(target=load, name=f"vllm-load:{job_id}", daemon=True).start()

    def free_device_for_training(self) -> None:
        """On a GPU the cached query models compete with training for memory: drop them."""
        loaded = "query_service" in self.__dict__ and self.query_service.loaded
        if self.device_plan.device != "cpu" and loaded:
            dropped = self.query_service.drop_cached()
            logger.info("Dropped {} cached query model(s) to free the device for training", dropped)

    def begin_shutdown(self) -> None:
        """The service was told to stop (SIGTERM, Ctrl-C): end the log streams now, so
        that the server need not wait for them, and ask the running job to stop at a
        checkpoint while connections drain. Returns at once; safe from a signal handler."""
        grace = self.settings.shutdown_grace_seconds
        logger.info("Stopping: log streams end, the running job pauses (grace {:.0f} s)", grace)
        if "job_feed" in self.__dict__:
            self.job_feed.close()
        if self.worker:
            self.worker.begin_stop(grace)

    def close(self) -> None:
        if self.worker:
            self.worker.stop(self.settings.shutdown_grace_seconds)
        if "query_service" in self.__dict__:
            # Engine threads end before the interpreter does: one still in torch at exit
            # aborted `qatune ask` ("terminate called without an active exception").
            self.query_service.drop_cached()
        if "exporter" in self.__dict__:
            self.exporter.close()
        if "password_work" in self.__dict__:
            self.password_work.close()
        if "database" in self.__dict__:
            self.database.dispose()
