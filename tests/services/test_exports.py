"""The export service's refusals, against the real disk."""

import json
import os
import shutil
from pathlib import Path

import pytest

from app.core.errors import NotPossibleHere
from app.core.storage import Storage
from app.ml.export.llama_cpp import default_converter_dir
from app.services.exports.exporter import Exporter, ExportKind, ExportSource, ExportStatus


def test_an_export_that_cannot_fit_on_the_disk_is_refused_before_it_starts(
    tmp_path: Path,
) -> None:
    storage = Storage(tmp_path / "data")
    storage.job_dir("k").mkdir(parents=True)
    base = tmp_path / "base"
    base.mkdir()
    # A sparse file as large as the free space: the export would need twice that.
    free = shutil.disk_usage(tmp_path).free
    with (base / "model.safetensors").open("wb") as handle:
        os.truncate(handle.fileno(), free)
    exporter = Exporter(storage, tmp_path / "llama.cpp")
    merged = ExportKind("merged")
    source = ExportSource(job_id=1, storage_key="k", base_model="builtin:tiny", base_dir=base)
    try:
        with pytest.raises(NotPossibleHere, match=r"Not enough disk .* GiB free under"):
            exporter.start(source, merged)
        assert exporter.state("k", merged).status == ExportStatus.NOT_STARTED
        assert not storage.exports_dir("k").exists()  # nothing half-written
    finally:
        exporter.close()


def test_gguf_needs_the_converter_and_an_architecture_it_knows(tmp_path: Path) -> None:
    storage = Storage(tmp_path / "data")
    storage.job_dir("k").mkdir(parents=True)
    base = tmp_path / "base"
    base.mkdir()
    (base / "config.json").write_text(json.dumps({"architectures": ["MadeUpForCausalLM"]}))
    source = ExportSource(job_id=1, storage_key="k", base_model="acme/made-up", base_dir=base)
    gguf = ExportKind("gguf", "f16")

    missing = Exporter(storage, tmp_path / "no-llama.cpp")
    try:
        with pytest.raises(NotPossibleHere, match="run `qatune fetch-llama-cpp` once"):
            missing.start(source, gguf)
    finally:
        missing.close()

    converter = default_converter_dir()
    if not (converter / "convert_hf_to_gguf.py").is_file():
        pytest.skip(f"llama.cpp's converter is not in {converter} (make setup fetches it)")
    exporter = Exporter(storage, converter)
    try:
        with pytest.raises(NotPossibleHere, match=r"cannot convert acme/made-up \(MadeUp"):
            exporter.start(source, gguf)
        assert exporter.state("k", gguf).status == ExportStatus.NOT_STARTED
        assert not storage.exports_dir("k").exists()  # nothing half-written
    finally:
        exporter.close()
