"""The service's sentences in other languages: every template written in app/ has its
translation, with the same placeholders, and a request's Accept-Language picks the
language (English when it names none this service speaks)."""

import ast
import string
from pathlib import Path

import pytest

from app.core.language import (
    LANGUAGES,
    Sentence,
    catalogue,
    negotiate,
    reset_language,
    said,
    tr,
    use_language,
    verbatim,
)

APP = Path(__file__).resolve().parents[2] / "app"


def templates() -> dict[str, str]:
    """Every literal given to tr(), said() or deferred() in app/ -> where it is."""
    found: dict[str, str] = {}
    for path in sorted(APP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("tr", "deferred", "said")
                and node.args
            ):
                first = node.args[0]
                assert not isinstance(first, ast.JoinedStr | ast.BinOp | ast.Call), (
                    f"{path}:{node.lineno}: tr() takes a template, not text made at run time"
                )
                # A template, or one of two (`said(A if x else B, ...)`)
                choices = [first.body, first.orelse] if isinstance(first, ast.IfExp) else [first]
                for choice in choices:
                    if isinstance(choice, ast.Constant) and isinstance(choice.value, str):
                        where = f"{path.relative_to(APP.parent)}:{node.lineno}"
                        found.setdefault(choice.value, where)
    return found


def placeholders(template: str) -> list[tuple[str, str | None, str | None]]:
    return sorted(
        (name, conversion, spec)
        for _, name, spec, conversion in string.Formatter().parse(template)
        if name is not None
    )


@pytest.mark.parametrize("language", [code for code in LANGUAGES if code != "en"])
def test_every_template_has_a_translation_with_its_placeholders(language: str) -> None:
    written = templates()
    assert len(written) > 200
    table = catalogue(language)
    missing = [
        f"{where}: {template!r}" for template, where in written.items() if template not in table
    ]
    assert not missing, f"not in app/core/locales/{language}/:\n" + "\n".join(missing)
    stale = [template for template in table if template not in written]
    assert not stale, f"in app/core/locales/{language}/ but no longer in app/: {stale}"
    for template, translated in table.items():
        assert placeholders(translated) == placeholders(template), template


@pytest.mark.parametrize(
    ("header", "language"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        ("en-GB,en;q=0.9,zh-CN;q=0.8", "en"),
        ("fr-FR, zh-Hans;q=0.5", "zh"),
        ("fr, de", "en"),
        ("zh;q=0, en", "en"),
        ("", "en"),
        ("*", "en"),
        ("zh;q=oops", "en"),
    ],
)
def test_accept_language_picks_the_language(header: str, language: str) -> None:
    assert negotiate(header) == language


def test_a_template_is_filled_in_the_language_in_use_and_english_elsewhere() -> None:
    template = "Job {job_id} not found; GET /jobs lists yours"
    assert tr(template, job_id=7) == "Job 7 not found; GET /jobs lists yours"
    token = use_language("zh")
    try:
        assert tr(template, job_id=7) == "找不到任务 7；GET /jobs 列出你的任务"
        assert tr("a sentence no catalogue has") == "a sentence no catalogue has"
    finally:
        reset_language(token)
    assert tr(template, job_id=7).startswith("Job 7")


# The errors whose message a user reads (app/core/errors.py, and those the API maps)
USER_ERRORS = {
    "BadRequest",
    "NotFoundError",
    "ConflictError",
    "ValidationFailed",
    "DataMismatch",
    "NotPossibleHere",
    "PayloadTooLarge",
    "AuthError",
    "ForbiddenError",
    "TooManyRequests",
    "ModelUnavailable",
    "AdapterInvalid",
    "PromptTooLong",
    "QuantizationUnavailable",
}


def user_errors(trees: dict[Path, ast.Module]) -> set[str]:
    """USER_ERRORS and every class in app/ made from one of them, however far down."""
    found = set(USER_ERRORS)
    classes = [
        node for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
    ]
    while True:
        more = {
            node.name
            for node in classes
            if any(getattr(base, "id", getattr(base, "attr", "")) in found for base in node.bases)
        }
        if more <= found:
            return found
        found |= more


def test_every_error_a_user_reads_is_a_template() -> None:
    """A message written in place (a string or an f-string) would stay English."""
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in APP.rglob("*.py")}
    errors = user_errors(trees)
    assert {"ShapeUnknown", "IllegalTransition"} <= errors
    written_in_place = []
    for path, tree in sorted(trees.items()):
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            name = getattr(node.exc.func, "id", getattr(node.exc.func, "attr", ""))
            if name in errors and node.exc.args:
                if isinstance(node.exc.args[0], ast.Constant | ast.JoinedStr):
                    written_in_place.append(f"{path.relative_to(APP.parent)}:{node.lineno}")
    assert not written_in_place, written_in_place


def test_a_sentence_kept_in_a_file_is_read_in_the_readers_language() -> None:
    """Why a run kept an earlier epoch's weights is written by the worker (in English) and
    read through the API in the language of whoever asks."""
    why = said(
        "kept the weights of epoch {epoch:g} (step {step}), {why}",
        epoch=20.0,
        step=40,
        why=said(
            "the most training answers learned: {learned}/{examples}, against {final} at the end",
            learned=15,
            examples=15,
            final=14,
        ),
    )
    stored = Sentence.model_validate_json(why.model_dump_json())
    assert stored.text() == (
        "kept the weights of epoch 20 (step 40), the most training answers learned: 15/15, "
        "against 14 at the end"
    )
    token = use_language("zh")
    try:
        assert stored.text() == (
            "保留了第 20 轮（第 40 步）的权重，因为它学会的训练回答最多：15/15，最终只有 14"
        )
    finally:
        reset_language(token)


def test_a_nul_quoted_from_the_data_never_reaches_a_plain_text_column() -> None:
    """A library's error may quote a training row's NUL: the job's failure must still be
    written (the database refuses text with a NUL)."""
    failure = said("Job failed: {reason}", reason=verbatim("bad token '\x00' in row 3"))
    assert failure.english() == "Job failed: bad token '\ufffd' in row 3"
