"""vLLM servers that qatune starts itself: one process per replica of a base model.

Each listens on loopback only, behind an API key made at start, so that nobody but qatune
reaches it (users go through qatune's auth, names and 404s), and lets adapters load at run
time (VLLM_ALLOW_RUNTIME_LORA_UPDATING). Its output goes to qatune's log, line by line.
Whether it is healthy, and restarting it when it is not, is the replicas' business
(vllm_replicas.py); this module only starts and stops the process.
"""

import os
import re
import secrets
import shlex
import signal
import socket
import subprocess
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import psutil
from loguru import logger

# vLLM's dtype names for qatune's precisions: answers match the built-in engine's only in
# the same precision.
VLLM_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
# On a CPU, vLLM reserves --gpu-memory-utilization of the machine's memory (default 0.92)
# and refuses to start when less than that is free, which beside other programs it never
# is. qatune gives it its KV cache in bytes instead (QATUNE_SERVE_KV_MEMORY_MB, as the
# built-in engine's), and starts it only where its weights, that cache and vLLM's own
# memory fit in what is free, less headroom for everything else.
CPU_HEADROOM_BYTES = 1 << 30
VLLM_OWN_BYTES = 1 << 30  # vLLM's process beyond weights and cache on a CPU (measured ~0.8)
BYTES_PER_WEIGHT = {"fp32": 4, "bf16": 2, "fp16": 2}
MEMORY_FLAGS = ("--gpu-memory-utilization", "--kv-cache-memory-bytes")
# A line of vLLM's output that says why it stopped: an exception, after its log prefix.
EXCEPTION = re.compile(r"\b([A-Z]\w*(?:Error|Exception)): (.+)$")
# vLLM's last words are often a wrapper whose cause was logged before it.
WRAPPER = re.compile(r"root cause above|see above", re.IGNORECASE)
OUTPUT_KEPT = 200  # lines of a server's output kept for its reason


class CannotStart(Exception):
    """A server qatune will not start, and why (the words `/ready` shows)."""


def memory_args(recipe: "ServerRecipe", available: int, total: int) -> list[str]:
    """vLLM's memory arguments on a CPU: its KV cache in bytes; CannotStart when the
    weights, the cache and vLLM itself do not fit in what is free."""
    weights = recipe.parameters * BYTES_PER_WEIGHT.get(recipe.precision, 4)
    needed = weights + recipe.kv_cache_bytes + VLLM_OWN_BYTES
    if available - CPU_HEADROOM_BYTES < needed:
        raise CannotStart(
            f"vLLM on the CPU needs about {needed / 2**30:.1f} GiB for {recipe.base_model} "
            f"(its weights in {recipe.precision}, a {recipe.kv_cache_bytes / 2**30:.1f} GiB "
            f"KV cache and itself) and 1 GiB to spare, and {available / 2**30:.1f} of "
            f"{total / 2**30:.1f} GiB are free: free memory, lower QATUNE_SERVE_KV_MEMORY_MB, "
            "or serve with the built-in engine (QATUNE_SERVING_BACKEND=builtin)"
        )
    return ["--kv-cache-memory-bytes", str(recipe.kv_cache_bytes)]


@dataclass(frozen=True)
class ServerRecipe:
    """How to start a vLLM server for one base model (each replica the same way)."""

    base_model: str  # qatune's name for it: vLLM serves it under this name
    model_dir: Path
    python: Path  # the vLLM environment's interpreter (`make vllm`)
    precision: str
    context: int  # --max-model-len
    max_lora_rank: int
    max_loras: int
    extra_args: str = ""
    parameters: int = 0  # the model's, to size its memory on a CPU
    on_cpu: bool = False  # vLLM runs on the CPU (no CUDA here)
    kv_cache_bytes: int = 1 << 30

    def command(self, port: int) -> list[str]:
        """The server's command line; on a CPU, with its KV cache's bytes where they fit in
        what is free now (unless QATUNE_VLLM_EXTRA_ARGS sizes its memory). CannotStart:
        they do not."""
        extra = shlex.split(self.extra_args)
        memory: list[str] = []
        if self.on_cpu and not any(a.startswith(MEMORY_FLAGS) for a in extra):
            free = psutil.virtual_memory()
            memory = memory_args(self, free.available, free.total)
        return [
            str(self.python),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.base_model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            VLLM_DTYPES.get(self.precision, "auto"),
            "--max-model-len",
            str(self.context),
            "--enable-lora",
            "--max-lora-rank",
            str(self.max_lora_rank),
            "--max-loras",
            str(self.max_loras),
            "--max-cpu-loras",
            str(self.max_loras * 4),
            "--generation-config",
            "vllm",  # sample as asked, not with defaults from the model's files
            "--disable-access-log-for-endpoints",
            "/health,/metrics",  # qatune checks every 2 s; the log keeps what matters
            *memory,
            *extra,
        ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ManagedServer:
    """One vLLM process; `start()` returns at once (a server takes a minute to be ready)."""

    def __init__(self, recipe: ServerRecipe, replica: int) -> None:
        self.recipe = recipe
        self.name = f"vllm[{recipe.base_model}#{replica}]"
        self.api_key = secrets.token_urlsafe(32)
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._output: deque[str] = deque(maxlen=OUTPUT_KEPT)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the process; CannotStart (and nothing started) when it could not run."""
        self.port = _free_port()
        env = {
            **os.environ,
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
            "VLLM_API_KEY": self.api_key,  # not on the command line, which `ps` shows
            "VLLM_NO_USAGE_STATS": "1",
            "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"),
        }
        command = self.recipe.command(self.port)
        self._output = deque(maxlen=OUTPUT_KEPT)  # this process's (an old pump keeps its own)
        logger.info("{}: starting on port {}: {}", self.name, self.port, shlex.join(command))
        self._process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its workers stop with it (stop() signals the group)
        )
        threading.Thread(
            target=self._pump, args=(self._process, self._output), name=self.name, daemon=True
        ).start()

    def _pump(self, process: "subprocess.Popen[bytes]", output: deque[str]) -> None:
        assert process.stdout is not None
        for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip()
            if line:
                output.append(line)
                logger.info("{}: {}", self.name, line)
        logger.warning("{}: exited with status {}", self.name, process.wait())

    def why_stopped(self) -> str:
        """Why the server exited, in vLLM's own words: the last exception in its output
        that is not a wrapper pointing at an earlier one (vLLM's engine start ends with
        "RuntimeError: Engine core initialization failed. See root cause above"), else its
        exit status."""
        code = self.exit_code
        status = f"exited ({code})" if code is not None else "running"
        wrapper = ""
        for line in reversed(self._output):
            found = EXCEPTION.search(line)
            if found is None:
                continue
            said = f"{found.group(1)}: {found.group(2)}"[:400]
            if not WRAPPER.search(said):
                return f"{status}: {said}"
            wrapper = wrapper or said
        return f"{status}: {wrapper}" if wrapper else status

    @property
    def exit_code(self) -> int | None:
        return None if self._process is None else self._process.poll()

    @property
    def alive(self) -> bool:
        return self._process is not None and self.exit_code is None

    def stop(self, grace: float = 10.0) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=grace)
        except ProcessLookupError:
            pass
