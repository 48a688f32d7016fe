"""The export service's refusals, against the real disk."""

import os
import shutil
from pathlib import Path

import pytest

from app.core.errors import NotPossibleHere
from app.core.storage import Storage
from app.services.exports import Exporter, ExportSource, ExportStatus


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
    exporter = Exporter(storage)
    try:
        with pytest.raises(NotPossibleHere, match=r"Not enough disk .* GiB free under"):
            exporter.start(ExportSource(job_id=1, storage_key="k", base_dir=base), "merged")
        assert exporter.state("k", "merged").status == ExportStatus.NOT_STARTED
        assert not storage.exports_dir("k").exists()  # nothing half-written
    finally:
        exporter.close()
