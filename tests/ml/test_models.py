"""Where a model name may be read from: never a directory the name merely happens to match."""

from pathlib import Path

import pytest

from app.ml.models import ModelUnavailable, resolve_model_dir
from tests.conftest import ROOT


def test_a_relative_name_is_a_hub_id_never_a_server_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert (ROOT / "app" / "ml").is_dir()  # a/b-shaped, and a directory right here
    with pytest.raises(ModelUnavailable, match="not cached") as refused:
        resolve_model_dir("app/ml", cache_dir=tmp_path, offline=True)
    assert "does not exist on the server" not in str(refused.value)


def test_absolute_and_configured_paths_are_read_from_disk(
    tmp_path: Path, model_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = next(model_cache.iterdir())
    assert resolve_model_dir(str(built), cache_dir=tmp_path, offline=True) == built
    with pytest.raises(ModelUnavailable, match="does not exist"):
        resolve_model_dir(str(tmp_path / "nope"), cache_dir=tmp_path, offline=True)
    link = tmp_path / "models-here"
    link.symlink_to(built)
    configured = "models-here"
    monkeypatch.chdir(tmp_path)
    assert resolve_model_dir(
        configured, cache_dir=tmp_path, offline=True, configured=[configured]
    ) == Path(configured)


@pytest.mark.parametrize("name", ["../x", "not a model", "a/b/c", "~/models"])
def test_anything_else_is_refused_without_touching_the_disk(tmp_path: Path, name: str) -> None:
    with pytest.raises(ModelUnavailable, match="not builtin:tiny, a hub id"):
        resolve_model_dir(name, cache_dir=tmp_path, offline=True)
