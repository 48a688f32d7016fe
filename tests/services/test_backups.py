"""Backup and restore of an instance's SQLite database and files, in process (the round
trip through a live service, while a job trains, is tests/reliability/test_backups.py)."""

from pathlib import Path

import pytest

from app.core.config import Settings
from app.core.errors import ValidationFailed
from app.core.security import load_or_create_secret
from app.core.storage import Storage
from app.db.models import Job, User
from app.db.session import Database
from app.services.jobs import runs as job_runs
from app.services.operations.backups import back_up, restore
from tests.conftest import prepare_data_dir
from tests.services.test_jobs import create_job


def instance(root: Path, model_cache: Path) -> tuple[Settings, Database]:
    prepare_data_dir(root / "data", model_cache)
    settings = Settings(data_dir=root / "data")
    database = Database.from_settings(settings)
    database.migrate()
    return settings, database


def running_job(settings: Settings, database: Database) -> int:
    with database.session() as session:
        user = User(username="owner", password_hash="x", is_admin=False)
        session.add(user)
        session.flush()
        create_job(session, settings, user.id)
    with database.session() as session:
        job_id = job_runs.claim_next_job(session, worker_id="elsewhere:1")
    assert job_id is not None
    return job_id


def test_a_round_trip_keeps_the_data_and_makes_a_new_instance(
    tmp_path: Path, model_cache: Path
) -> None:
    settings, database = instance(tmp_path / "old", model_cache)
    job_id = running_job(settings, database)
    old_key = load_or_create_secret(settings.data_dir / "secret_key")

    manifest = back_up(settings, tmp_path / "backup")
    assert manifest.database == "sqlite" and manifest.files >= 1
    assert not (tmp_path / "backup" / "data" / "secret_key").exists()  # secrets stay

    new_settings, _ = instance(tmp_path / "new", model_cache)
    (new_settings.data_dir / "qatune.db").unlink()  # an empty data directory
    restored = restore(new_settings, tmp_path / "backup")
    assert restored.requeued == [job_id]
    with Database.from_settings(new_settings).session() as session:
        job = session.get(Job, job_id)
        assert job is not None and job.status == "queued" and job.failures == 0
        key = job.storage_key
        (user,) = session.query(User).all()
        assert user.password_changed_at is not None  # tokens issued before are refused
    assert Storage(new_settings.data_dir).job_train_file(key).exists()
    assert (new_settings.data_dir / "secret_key").read_text().strip() != old_key


def test_what_cannot_be_done_is_refused_saying_why(tmp_path: Path, model_cache: Path) -> None:
    settings, _ = instance(tmp_path / "old", model_cache)
    with pytest.raises(ValidationFailed, match="inside the data directory"):
        back_up(settings, settings.data_dir / "backup")
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    with pytest.raises(ValidationFailed, match="not empty"):
        back_up(settings, used)
    with pytest.raises(ValidationFailed, match="not a qatune backup"):
        restore(settings, used)
    back_up(settings, tmp_path / "backup")
    with pytest.raises(ValidationFailed, match="is in use"):
        restore(settings, tmp_path / "backup")
    assert not list(tmp_path.glob(".*.partial"))  # nothing half-written left behind
