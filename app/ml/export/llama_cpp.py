"""llama.cpp's own converters (`convert_hf_to_gguf.py`, `convert_lora_to_gguf.py`), taken
from llama-cpp-python's source distribution on PyPI, which vendors llama.cpp: the registry
is the only place this service may download from, and a maintained converter beats one of
ours. One pinned version, so that what converts and what the tests load (llama-cpp-python,
built from the same sdist) agree.

`python -m app.ml.export.llama_cpp CONVERTER CONVERSIONS` runs the scripts one after another
in one process (torch, transformers and gguf imported once), with one hook
(`_byte_level_pre_tokenizer`); `fetch_converter` (`qatune fetch-llama-cpp`) installs them.
"""

import json
import os
import runpy
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_PYTHON = "0.3.36"
# What the conversion needs from vendor/llama.cpp, and nothing that compiles.
_MEMBERS = (
    "convert_hf_to_gguf.py",
    "convert_lora_to_gguf.py",
    "conversion/",
    "gguf-py/gguf/",
    "LICENSE",
)


class ConverterMissing(Exception):
    """llama.cpp's converter is not installed here (`qatune fetch-llama-cpp`)."""


class ConversionFailed(Exception):
    """One of the scripts refused the model; the message is its last words."""

    def __init__(self, script: str, message: str) -> None:
        super().__init__(message)
        self.script = script


def default_converter_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "qatune" / f"llama.cpp-{LLAMA_CPP_PYTHON}"


def require_converter(directory: Path) -> Path:
    if not (directory / "convert_hf_to_gguf.py").is_file():
        raise ConverterMissing(
            f"GGUF export needs llama.cpp's converter, which is not in {directory}: run "
            "`qatune fetch-llama-cpp` once on the server (it downloads llama-cpp-python "
            f"{LLAMA_CPP_PYTHON}'s source from PyPI), or set QATUNE_LLAMA_CPP_DIR to a "
            "llama.cpp checkout"
        )
    return directory


def unknown_architecture(converter: Path, model_dir: Path) -> str | None:
    """None if llama.cpp's converter knows the model's architecture, else its name (read off
    its TEXT_MODEL_MAP without importing it, before minutes of merging are spent)."""
    config = json.loads((model_dir / "config.json").read_text())
    architecture = str((config.get("architectures") or ["unknown"])[0])
    known = (converter / "conversion" / "__init__.py").read_text()
    return None if f'"{architecture}":' in known else architecture


def fetch_converter(target: Path) -> Path:
    """Download the sdist through pip (its index and cache settings apply) and keep the
    converter's files. Idempotent; the folder appears whole or not at all."""
    if (target / "convert_hf_to_gguf.py").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        command += ["--no-binary", ":all:", "--dest", scratch]
        command += [f"llama-cpp-python=={LLAMA_CPP_PYTHON}"]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise ConverterMissing(f"pip could not download llama-cpp-python: {done.stderr[-500:]}")
        (sdist,) = Path(scratch).glob("*.tar.gz")
        staging = Path(scratch) / "llama.cpp"
        with tarfile.open(sdist) as archive:
            prefix = f"{archive.getmembers()[0].name.split('/')[0]}/vendor/llama.cpp/"
            for member in archive.getmembers():
                inner = member.name.removeprefix(prefix)
                if member.name.startswith(prefix) and inner.startswith(_MEMBERS):
                    member.name = inner
                    archive.extract(member, staging, filter="data")
        os.replace(staging, target)
    return target


@dataclass(frozen=True)
class Conversion:
    """One run of one of llama.cpp's scripts: `script ARGS…`."""

    script: str
    args: tuple[str, ...]


_STARTING = "qatune-conversion-starts "  # the child's line before each conversion


def run_conversions(
    converter: Path,
    conversions: Sequence[Conversion],
    *,
    timeout: float,
    on_start: Callable[[int], None] = lambda index: None,
) -> None:
    """llama.cpp's scripts, in order, in one child process (each loads a whole model: the
    API's memory stays as it was; one process imports torch and the converter once: three
    took 2.8x its CPU, bench/gguf_export.py). `on_start(i)` as the i-th begins;
    ConversionFailed(script, last words) for the first that fails, and none runs after it."""
    plan = json.dumps([[c.script, *c.args] for c in conversions])
    with tempfile.TemporaryFile() as errors:
        child = subprocess.Popen(
            [sys.executable, "-m", __name__, str(converter), plan],
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        stopped = threading.Event()

        def stop() -> None:  # a stuck converter holds no export slot forever
            stopped.set()
            child.kill()

        timer = threading.Timer(timeout, stop)
        timer.start()
        started = -1
        try:
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith(_STARTING):
                    started = int(line.removeprefix(_STARTING))
                    on_start(started)
            returncode = child.wait()
        except BaseException:  # the export was given up (on_start raised): so is the child
            child.kill()
            child.wait()
            raise
        finally:
            timer.cancel()
        if returncode != 0:
            errors.seek(0)
            text = errors.read().decode(errors="replace")
            said = [line for line in text.splitlines() if line.strip()]
            failed = conversions[max(started, 0)]
            if stopped.is_set():
                raise ConversionFailed(failed.script, f"stopped after {timeout:g} s")
            raise ConversionFailed(
                failed.script, said[-1] if said else f"{failed.script} exited {returncode}"
            )


def _byte_level_pre_tokenizer() -> None:
    """llama.cpp names each BPE tokenizer's pre-tokenizer by hashing how it splits a probe
    text, and refuses hashes it does not know. A vocabulary whose merges never fire on the
    probe (one token per byte, like the built-in model's) splits every text into bytes
    whatever the pre-tokenizer, so for it any name is right: we give "default"."""
    from conversion.base import TextModel

    known = TextModel.get_vocab_base_pre
    probe = "Hello, wörld! 3.14 ?我想在apple工作 🦙 I've 'RE\n\t  x"

    def get_vocab_base_pre(self: object, tokenizer: object) -> str:
        try:
            return str(known(self, tokenizer))
        except NotImplementedError:
            ids = tokenizer.encode(probe, add_special_tokens=False)  # type: ignore[attr-defined]
            if len(ids) != len(probe.encode()):
                raise
            return "default"

    TextModel.get_vocab_base_pre = get_vocab_base_pre


def _run(converter: Path, plan: list[list[str]]) -> None:
    sys.path[:0] = [str(converter), str(converter / "gguf-py")]
    print(f"{_STARTING}0", flush=True)  # before the converter's imports, which are its part
    _byte_level_pre_tokenizer()
    for index, (script, *args) in enumerate(plan):
        if index:
            print(f"{_STARTING}{index}", flush=True)
        sys.argv = [str(converter / script), *args]
        try:
            runpy.run_path(str(converter / script), run_name="__main__")
        except SystemExit as done:  # the scripts end with sys.exit; only a failure stops
            if done.code not in (None, 0):
                raise


if __name__ == "__main__":
    _run(Path(sys.argv[1]), json.loads(sys.argv[2]))
