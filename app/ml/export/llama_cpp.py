"""llama.cpp's own converters (`convert_hf_to_gguf.py`, `convert_lora_to_gguf.py`), taken
from llama-cpp-python's source distribution on PyPI, which vendors llama.cpp: the registry
is the only place this service may download from, and a maintained converter beats one of
ours. One pinned version, so that what converts and what the tests load (llama-cpp-python,
built from the same sdist) agree.

`python -m app.ml.export.llama_cpp CONVERTER SCRIPT ARGS…` runs one of the scripts with one
hook (`_byte_level_pre_tokenizer`); `fetch_converter` (`qatune fetch-llama-cpp`) installs it.
"""

import json
import os
import runpy
import subprocess
import sys
import tarfile
import tempfile
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
    """The converter refused the model; the message is its last words."""


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


def run_converter(converter: Path, script: str, args: list[str], *, timeout: float) -> None:
    """One of llama.cpp's scripts in a child process (it loads the whole model; the API's
    memory stays as it was)."""
    command = [sys.executable, "-m", __name__, str(converter), script, *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise ConversionFailed(lines[-1] if lines else f"{script} exited {done.returncode}")


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


if __name__ == "__main__":
    converter, script = Path(sys.argv[1]), sys.argv[2]
    sys.path[:0] = [str(converter), str(converter / "gguf-py")]
    _byte_level_pre_tokenizer()
    sys.argv = [str(converter / script), *sys.argv[3:]]
    runpy.run_path(str(converter / script), run_name="__main__")
