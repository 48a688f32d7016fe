"""`grade`: one grader, one model sample, one item → a `Grade`.

Everything a grader can get wrong on one sample (a variable the item lacks, a judge that
answers nonsense, a python grader that raises) scores 0 with OpenAI's error flag, so a run
over many items goes on; what is wrong with the grader itself was refused when it was
checked (spec.py, services/evals/graders.py).
"""

import asyncio
import time
from typing import Any

from app.core.language import tr
from app.graders.formula import FormulaError
from app.graders.model_graders import ask_judge, label, score
from app.graders.results import Grade, GradeErrors, Sample
from app.graders.spec import (
    AnyGrader,
    LabelModel,
    Multi,
    Python,
    ScoreModel,
    StringCheck,
    TextSimilarity,
)
from app.graders.string_check import string_check
from app.graders.templates import MissingVariable, render
from app.graders.text_similarity import similarity
from app.graders.tools import Message, Tools

ROLES = {"developer": "system"}  # the chat templates of open models know system, not developer


async def grade(grader: AnyGrader, sample: Sample, item: Any, tools: Tools) -> Grade:
    started = time.perf_counter()
    namespaces = {"item": item, "sample": sample.namespace()}
    try:
        result = await _grade(grader, sample, item, namespaces, tools)
    except MissingVariable as exc:
        unparsed = exc.variable.path[:1] == ("output_json",)
        errors = GradeErrors(sample_parse_error=unparsed, invalid_variable_error=not unparsed)
        result = Grade.failed(grader.name, grader.type, errors, str(exc))
    result.seconds = round(time.perf_counter() - started, 4)
    return result


async def _grade(
    grader: AnyGrader, sample: Sample, item: Any, namespaces: dict[str, Any], tools: Tools
) -> Grade:
    match grader:
        case StringCheck():
            text, reference = render(grader.input, namespaces), render(grader.reference, namespaces)
            reward = string_check(grader.operation, text, reference)
            return Grade(grader.name, grader.type, reward)
        case TextSimilarity():
            text, reference = render(grader.input, namespaces), render(grader.reference, namespaces)
            if (
                grader.evaluation_metric == "cosine"
            ):  # refused on checking; here for evals read back
                errors = GradeErrors(other_error=True)
                return Grade.failed(grader.name, grader.type, errors, "no embedding model")
            metric = grader.evaluation_metric
            reward = await asyncio.to_thread(similarity, metric, text, reference)
            return Grade(grader.name, grader.type, reward)
        case ScoreModel() | LabelModel():
            messages: list[Message] = [
                {"role": ROLES.get(m.role, m.role), "content": render(m.text, namespaces)}
                for m in grader.input
            ]
            answer = await ask_judge(grader, messages, tools.judge)
            if isinstance(answer, Grade):
                return answer
            return (
                score(grader, answer) if isinstance(grader, ScoreModel) else label(grader, answer)
            )
        case Python():
            return await _python(grader, sample, item, tools)
        case Multi():
            return await _multi(grader, sample, item, tools)


async def _python(grader: Python, sample: Sample, item: Any, tools: Tools) -> Grade:
    if tools.sandbox is None:
        why = "python graders are off on this service"
        errors = GradeErrors(python_grader_server_error=True, python_grader_server_error_type="off")
        return Grade.failed(grader.name, grader.type, errors, why)
    outcome = await tools.sandbox.run(grader.source, sample.namespace(), item)
    if outcome.value is not None:
        return Grade(grader.name, grader.type, outcome.value)
    if outcome.server_error is not None:
        errors = GradeErrors(
            python_grader_server_error=True, python_grader_server_error_type="sandbox"
        )
        return Grade.failed(grader.name, grader.type, errors, outcome.server_error)
    why = outcome.error or tr("no score")
    errors = GradeErrors(python_grader_runtime_error=True, python_grader_runtime_error_details=why)
    return Grade.failed(grader.name, grader.type, errors, why)


async def _multi(grader: Multi, sample: Sample, item: Any, tools: Tools) -> Grade:
    names = list(grader.graders)
    grades = await asyncio.gather(
        *(grade(grader.graders[name], sample, item, tools) for name in names)
    )
    result = Grade(grader.name, grader.type, 0.0)
    for name, sub in zip(names, grades, strict=True):
        result.sub_rewards[name] = sub.reward
        result.scores[name] = sub.reward
        result.errors.absorb(sub.errors)
        for model, tokens in sub.tokens_per_model.items():
            result.tokens_per_model[model] = result.tokens_per_model.get(model, 0) + tokens
    try:
        result.reward = grader.formula.evaluate(result.sub_rewards)
    except FormulaError as exc:
        result.errors.formula_parse_error = True
        result.explanation = str(exc)
    return result
