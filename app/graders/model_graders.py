"""`score_model` and `label_model`: a model the service serves judges the answer.

The judge reads the grader's messages with their templates filled in and answers in
words. OpenAI constrains its judges to JSON; a local judge may not follow that, so its
answer is read leniently: `{"result": …}` if it wrote JSON, else the first number (score)
or the one label it names (label). An answer that says neither scores 0 with
`model_grader_parse_error`.
"""

import re
from typing import Any

from app.core.json_text import parse_json
from app.graders.results import Grade, GradeErrors
from app.graders.spec import LabelModel, ScoreModel
from app.graders.tools import Judge, JudgeAnswer, JudgeFailed, Message

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


async def ask_judge(
    grader: ScoreModel | LabelModel, messages: list[Message], judge: Judge | None
) -> JudgeAnswer | Grade:
    """The judge's answer, or the failed grade if it has none."""
    if judge is None:
        why = "no judge model can be asked here"
    else:
        sampling = grader.sampling_params if isinstance(grader, ScoreModel) else None
        try:
            return await judge.ask(grader.model, messages, sampling)
        except JudgeFailed as exc:
            why = str(exc)
    errors = GradeErrors(model_grader_server_error=True, model_grader_server_error_details=why)
    return Grade.failed(grader.name, grader.type, errors, why)


def score(grader: ScoreModel, answer: JudgeAnswer) -> Grade:
    value = _number(answer.text)
    low, high = grader.bounds
    usage = {grader.model: answer.tokens}
    if value is None or not low <= value <= high:
        why = (
            f"the judge's answer {answer.text[:200]!r} holds no number"
            if value is None
            else f"the judge scored {value}, outside the range [{low}, {high}]"
        )
        failed = Grade.failed(
            grader.name, grader.type, GradeErrors(model_grader_parse_error=True), why
        )
        failed.tokens_per_model = usage
        return failed
    return Grade(
        grader.name, grader.type, value, tokens_per_model=usage, explanation=answer.text[:2000]
    )


def label(grader: LabelModel, answer: JudgeAnswer) -> Grade:
    chosen = _label(answer.text, grader.labels)
    usage = {grader.model: answer.tokens}
    if chosen is None:
        why = f"the judge's answer {answer.text[:200]!r} names none of {grader.labels}"
        failed = Grade.failed(
            grader.name, grader.type, GradeErrors(model_grader_parse_error=True), why
        )
        failed.tokens_per_model = usage
        return failed
    reward = float(chosen in grader.passing_labels)
    return Grade(
        grader.name,
        grader.type,
        reward,
        scores={chosen: reward},
        tokens_per_model=usage,
        explanation=answer.text[:2000],
    )


def _result(text: str) -> Any:
    """The `result` of a JSON answer, if the judge wrote one."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        parsed = parse_json(text[start : end + 1])
    except ValueError:
        return None
    return parsed.get("result") if isinstance(parsed, dict) else None


def _number(text: str) -> float | None:
    result = _result(text)
    if isinstance(result, int | float) and not isinstance(result, bool):
        return float(result)
    found = NUMBER.search(text if result is None else str(result))
    return float(found.group()) if found else None


def _label(text: str, labels: list[str]) -> str | None:
    result = _result(text)
    said = (str(result) if result is not None else text).strip().strip("\"'.!` \n").casefold()
    exact = [label for label in labels if label.casefold() == said]
    if exact:
        return exact[0]
    named = [
        label
        for label in labels
        if re.search(rf"(?<!\w){re.escape(label.casefold())}(?!\w)", said) is not None
    ]
    return named[0] if len(named) == 1 else None
