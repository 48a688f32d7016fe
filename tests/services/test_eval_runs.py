"""A run left going by a stopped service is failed when it starts again, saying why (in
each reader's language)."""

from pathlib import Path

from app.core.config import Settings
from app.core.language import reset_language, use_language
from app.db.models import Eval, EvalRun, User
from app.graders.evals import CustomDataSourceConfig, FileContent, JsonlSource, Row
from app.graders.spec import StringCheck
from app.runtime import Runtime
from tests.conftest import prepare_data_dir


def test_runs_left_going_are_failed_on_start(tmp_path: Path, model_cache: Path) -> None:
    prepare_data_dir(tmp_path, model_cache)
    runtime = Runtime(Settings(data_dir=tmp_path))
    runtime.database.migrate()
    check = StringCheck(type="string_check", name="c", input="x", reference="x", operation="eq")
    source = JsonlSource(
        type="jsonl", source=FileContent(type="file_content", content=[Row(item={})])
    )
    with runtime.database.session() as session:
        user = User(username="u", password_hash="x", is_admin=False)
        session.add(user)
        session.flush()
        evaluation = Eval(
            owner_id=user.id,
            name="e",
            data_source_config=CustomDataSourceConfig(type="custom"),
            testing_criteria=[check],
        )
        session.add(evaluation)
        session.flush()
        for status in ("queued", "in_progress", "completed"):
            session.add(
                EvalRun(
                    eval_id=evaluation.id,
                    owner_id=user.id,
                    name=status,
                    status=status,
                    data_source=source,
                )
            )
    runtime.eval_runner.recover()
    with runtime.database.session() as session:
        runs = {run.name: run for run in session.query(EvalRun)}
        assert {name: run.status for name, run in runs.items()} == {
            "queued": "failed",
            "in_progress": "failed",
            "completed": "completed",
        }
        assert runs["in_progress"].error == "The service stopped during the run; start a new run"
        assert runs["completed"].error is None
        token = use_language("zh")  # a reader of the run in Chinese
        try:
            assert runs["in_progress"].error_text() == "运行期间服务已停止；请开始新的运行"
        finally:
            reset_language(token)
