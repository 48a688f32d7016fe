"""A Promptfoo suite (promptfooconfig.yaml, or its tests alone) as a qatune eval.

Promptfoo runs each prompt on each test's `vars` and checks the answer with the test's
`assert` list (and `defaultTest`'s); a test passes when all its asserts do. Here an eval's
criteria grade every item, so each kind of assert becomes one criterion (the second of a
kind in a test a second criterion, and so on) whose expected value each item carries in a
field of its own. A test without that assert leaves the field out, and the item schema
makes it optional, so that criterion does not grade it (`app.graders.evals.optional_reads`).

Taken, and how: `equals` and `not-equals` (string_check eq, ne), `contains`, `icontains`,
`contains-all`, `icontains-all` (like, ilike: one criterion per value), `similar`
(text_similarity ROUGE-L: no embedding model is served here, so words are compared rather
than meanings, at the same threshold), `bleu`, `gleu`, `meteor` (text_similarity), and
`llm-rubric` (score_model, judged by the model the import names). Every other assert is
named back with why, and not graded. Prompts are templates on the vars (`{{question}}`);
a prompt in a file (`file://`) or written in code cannot be read from here and is named.
"""

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from app.core import text_files
from app.core.json_text import lone_surrogate_at, not_unicode_at, parse_json
from app.core.language import deferred, tr
from app.graders.evals import Criterion, CustomDataSourceConfig, TemplateMessages
from app.graders.spec import JudgeMessage, ScoreModel, StringCheck, TextSimilarity

MAX_TESTS = 10_000  # an eval's inline items, as OpenAI's
MAX_CRITERIA = 32  # an eval's, as /v1/evals takes them
VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][\w.]*)\s*\}\}")  # Nunjucks' plain {{ name }}
ANSWER = "{{ sample.output_text }}"
DEFAULT_SIMILAR = 0.75  # Promptfoo's thresholds when an assert gives none
DEFAULT_OVERLAP = 0.5
RUBRIC_SYSTEM = (
    "You grade an answer against a rubric. Reply with one number from 0 to 1 and nothing "
    "else: 1 when the answer meets the rubric, 0 when it does not, between when it partly does."
)
# Asserts there is no grader for here, and why (the others are mapped in `_criterion`).
UNMAPPED_WHY = {
    "javascript": deferred("Promptfoo runs JavaScript in its own process; qatune runs none"),
    "python": deferred(
        "a Promptfoo python assert is not a qatune python grader; rewrite it as one "
        "(def grade(sample, item)) in the eval's criteria"
    ),
    "contains-any": deferred("no grader here passes on any one of several values"),
    "icontains-any": deferred("no grader here passes on any one of several values"),
    "starts-with": deferred("no grader here checks how an answer starts; use contains"),
    "regex": deferred("no grader here matches a regular expression"),
    "levenshtein": deferred("no grader here counts edits; similar or bleu compare texts"),
}
UNMAPPED_OTHER = deferred("Promptfoo's {kind} assert has no grader here")


class PromptfooInvalid(ValueError):
    """The file is not a Promptfoo suite qatune can read; the message says what to fix."""


@dataclass(frozen=True)
class Unmapped:
    test: int  # the test's number in the file, from 1
    assert_type: str
    why: str


@dataclass
class PromptfooSuite:
    """What the import makes: the eval's parts, its items, and a run's messages per prompt."""

    name: str
    config: CustomDataSourceConfig
    criteria: list[Criterion]
    items: list[dict[str, Any]]
    prompts: list[TemplateMessages]
    unmapped: list[Unmapped] = field(default_factory=list)


class _NoAliases(yaml.SafeLoader):
    """YAML without anchors and aliases: a few lines of them can stand for gigabytes."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.events.AliasEvent):
            raise PromptfooInvalid(
                tr("the file uses YAML aliases (*name); write each value out instead")
            )
        return super().compose_node(parent, index)


def read(content: bytes) -> Any:
    """The file's document, JSON or YAML, as JSON values (a YAML date is its text);
    PromptfooInvalid where it is none, text_files.NotText where the file is no text."""
    text = text_files.read(content)
    try:
        document = json.loads(text)
    except ValueError:
        document = _yaml(text)
    except RecursionError as exc:
        raise PromptfooInvalid(tr("the file is nested too deeply")) from exc
    try:  # JSON values only: a YAML date as its text, no NaN or infinity to store
        values = json.loads(json.dumps(document, default=str, allow_nan=False))
    except ValueError as exc:
        raise PromptfooInvalid(tr("the file holds a number that is not finite")) from exc
    except RecursionError as exc:
        raise PromptfooInvalid(tr("the file is nested too deeply")) from exc
    if (at := lone_surrogate_at(values)) is not None:
        raise PromptfooInvalid(not_unicode_at(at))
    return values


def _yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_NoAliases)  # noqa: S506 (a SafeLoader)
    except RecursionError as exc:
        raise PromptfooInvalid(tr("the file is nested too deeply")) from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        why = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise PromptfooInvalid(
            tr("the file is neither JSON nor YAML: {why}", why=f"{where}{why}"[:200])
        ) from exc


def convert(document: Any, *, judge: str | None) -> PromptfooSuite:
    """`document`: the parsed YAML or JSON, a config or a list of tests. `judge`: the
    model that grades llm-rubric asserts (None: they are named as unmapped)."""
    if isinstance(document, list):
        document = {"tests": document}
    if not isinstance(document, dict):
        raise PromptfooInvalid(tr("a Promptfoo file is a config (an object) or a list of tests"))
    tests = document.get("tests")
    if isinstance(tests, str | dict):
        raise PromptfooInvalid(
            tr(
                "tests is a reference ({tests}): put the tests themselves in the file",
                tests=str(tests)[:80],
            )
        )
    if not isinstance(tests, list) or not tests:
        raise PromptfooInvalid(tr("the file has no tests: give tests, a list of vars and asserts"))
    if len(tests) > MAX_TESTS:
        raise PromptfooInvalid(
            tr(
                "the file has {count} tests; an eval takes at most {limit}",
                count=len(tests),
                limit=MAX_TESTS,
            )
        )
    default = document.get("defaultTest") or {}
    if not isinstance(default, dict):
        raise PromptfooInvalid(
            tr("defaultTest is a reference: put its vars and asserts in the file")
        )
    builder = _Builder(judge)
    for number, test in enumerate(tests, start=1):
        if not isinstance(test, dict):
            raise PromptfooInvalid(
                tr("test {number} is not an object of vars and asserts", number=number)
            )
        builder.add(number, default, test)
    if not builder.criteria:
        raise PromptfooInvalid(
            tr(
                "none of the tests' asserts has a grader here: {unmapped}",
                unmapped="; ".join(f"{u.assert_type}: {u.why}" for u in builder.unmapped[:5])
                or tr("the tests have no asserts"),
            )
        )
    if len(builder.criteria) > MAX_CRITERIA:
        raise PromptfooInvalid(
            tr(
                "the tests' asserts make {count} criteria ({names}); an eval holds at most "
                "{limit}: split the file",
                count=len(builder.criteria),
                names=", ".join(list(builder.criteria)[:40]),
                limit=MAX_CRITERIA,
            )
        )
    prompts = _prompts(document.get("prompts"), builder.var_names)
    description = document.get("description")
    return PromptfooSuite(
        name=str(description)[:200] if description else "promptfoo",
        config=CustomDataSourceConfig(
            type="custom",
            item_schema={
                "type": "object",
                "properties": {
                    "vars": {"type": "object"},
                    "description": {"type": "string"},
                    **{name: {} for name in builder.criteria},
                },
                "required": ["vars"],
            },
            include_sample_schema=True,
        ),
        criteria=list(builder.criteria.values()),
        items=builder.items,
        prompts=prompts,
        unmapped=builder.unmapped,
    )


class _Builder:
    def __init__(self, judge: str | None) -> None:
        self.judge = judge
        self.criteria: dict[str, Criterion] = {}  # by the item field it reads
        self.items: list[dict[str, Any]] = []
        self.unmapped: list[Unmapped] = []
        self.var_names: list[str] = []

    def add(self, number: int, default: dict[str, Any], test: dict[str, Any]) -> None:
        variables = {
            **_object(default.get("vars"), "defaultTest.vars"),
            **_object(test.get("vars"), f"tests.{number}.vars"),
        }
        for name in variables:
            if name not in self.var_names:
                self.var_names.append(name)
        item: dict[str, Any] = {"vars": variables}
        if test.get("description"):
            item["description"] = str(test["description"])
        seen: dict[str, int] = {}
        for check in [*_asserts(default, "defaultTest"), *_asserts(test, f"tests.{number}")]:
            kind = str(check.get("type", ""))
            for value in _values(kind, check.get("value")):
                if isinstance(value, str) and value.startswith("file://"):
                    self._unmapped(
                        number,
                        kind,
                        tr(
                            "its value is in a file ({value}), which cannot be read from here",
                            value=value[:80],
                        ),
                    )
                    continue
                made = self._criterion(kind, check, number)
                if made is None:
                    continue
                slot_kind, criterion_for = made
                seen[slot_kind] = seen.get(slot_kind, 0) + 1
                slot = slot_kind if seen[slot_kind] == 1 else f"{slot_kind}_{seen[slot_kind]}"
                if slot not in self.criteria:
                    try:
                        self.criteria[slot] = criterion_for(slot)
                    except ValidationError as exc:  # a judge's name no grader takes
                        raise PromptfooInvalid(
                            tr(
                                "test {number}'s {kind} cannot be a criterion here: check "
                                "the judge's name",
                                number=number,
                                kind=kind,
                            )
                        ) from exc
                item[slot] = _filled(value, variables)
        self.items.append(item)

    def _criterion(self, kind: str, check: dict[str, Any], number: int) -> Any:
        """(the criterion's kind, a maker of it for its item field), or None if unmapped."""
        threshold = check.get("threshold")
        number_threshold = (
            float(threshold)
            if isinstance(threshold, int | float) and math.isfinite(threshold)
            else None
        )
        key = kind.replace("-", "_")
        if kind in (
            "equals",
            "not-equals",
            "contains",
            "icontains",
            "contains-all",
            "icontains-all",
        ):
            operation = {
                "equals": "eq",
                "not-equals": "ne",
                "icontains": "ilike",
                "icontains-all": "ilike",
            }.get(kind, "like")
            key = key.removesuffix("_all")
            return key, lambda slot: StringCheck(
                type="string_check",
                name=slot,
                input=ANSWER,
                reference=f"{{{{ item.{slot} }}}}",
                operation=operation,
            )
        if kind in ("similar", "bleu", "gleu", "meteor"):
            metric = "rouge_l" if kind == "similar" else kind
            pass_at = (
                number_threshold
                if number_threshold is not None
                else (DEFAULT_SIMILAR if kind == "similar" else DEFAULT_OVERLAP)
            )
            key = f"{key}_{pass_at:g}".replace(".", "_")  # each threshold a criterion
            return key, lambda slot: TextSimilarity(
                type="text_similarity",
                name=slot,
                input=ANSWER,
                reference=f"{{{{ item.{slot} }}}}",
                evaluation_metric=metric,
                pass_threshold=pass_at,
            )
        if kind == "llm-rubric":
            if self.judge is None:
                self._unmapped(
                    number,
                    kind,
                    tr(
                        "an llm-rubric needs a judge: name one of your models as judge when "
                        "importing"
                    ),
                )
                return None
            judge = self.judge
            pass_at = number_threshold if number_threshold is not None else 0.5
            key = f"{key}_{pass_at:g}".replace(".", "_")
            return key, lambda slot: ScoreModel(
                type="score_model",
                name=slot,
                model=judge,
                input=[
                    JudgeMessage(role="system", content=RUBRIC_SYSTEM),
                    JudgeMessage(
                        role="user", content=f"Rubric: {{{{ item.{slot} }}}}\n\nAnswer: {ANSWER}"
                    ),
                ],
                range=(0.0, 1.0),
                pass_threshold=pass_at,
            )
        why = UNMAPPED_WHY.get(kind)
        self._unmapped(
            number,
            kind or "(no type)",
            tr(why) if why else tr(UNMAPPED_OTHER, kind=kind or "(no type)"),
        )
        return None

    def _unmapped(self, number: int, kind: str, why: str) -> None:
        self.unmapped.append(Unmapped(number, kind, why))


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PromptfooInvalid(tr("{where} must be an object of names and values", where=where))
    return {str(name): text for name, text in value.items()}


def _asserts(test: dict[str, Any], where: str) -> list[dict[str, Any]]:
    found = test.get("assert") or []
    if not isinstance(found, list) or not all(isinstance(check, dict) for check in found):
        raise PromptfooInvalid(
            tr("{where}.assert must be a list of asserts, each with a type", where=where)
        )
    return found


def _values(kind: str, value: Any) -> list[Any]:
    """The values one assert checks: each of contains-all's, else the one."""
    if kind.endswith("contains-all") and isinstance(value, list):
        return value
    return [value]


def _filled(value: Any, variables: dict[str, Any]) -> str:
    """An assert's value with the test's vars put in (`{{expected}}`), as Promptfoo renders
    it; anything but text is compared as its JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    def var(match: re.Match[str]) -> str:
        found = variables.get(match.group(1))
        if found is None:
            return match.group(0)
        return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)

    return VARIABLE.sub(var, text)


def _prompts(prompts: Any, var_names: list[str]) -> list[TemplateMessages]:
    """Each prompt as a run's messages, its vars read from the item (`{{ item.vars.x }}`).
    None given: the one var, asked as it is."""
    if prompts is None:
        if len(var_names) != 1:
            raise PromptfooInvalid(
                tr(
                    "the file has no prompts; give prompts, such as 'Answer: {{question}}', or "
                    "tests with one var each"
                )
            )
        return [_messages([{"role": "user", "content": f"{{{{{var_names[0]}}}}}"}])]
    listed = prompts if isinstance(prompts, list) else [prompts]
    made = []
    for prompt in listed:
        text = prompt.get("raw") if isinstance(prompt, dict) else prompt
        if not isinstance(text, str) or text.startswith(("file://", "python:", "javascript:")):
            shown = json.dumps(prompt, ensure_ascii=False)[:80]
            raise PromptfooInvalid(
                tr(
                    "the prompt {prompt} is in a file or code, which cannot be read from here: "
                    "write it in the file",
                    prompt=shown,
                )
            )
        try:
            chat = parse_json(text)
        except ValueError:
            chat = None
        if isinstance(chat, list) and all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in chat
        ):
            made.append(_messages(chat))
        else:
            made.append(_messages([{"role": "user", "content": text}]))
    return made


def _messages(chat: list[dict[str, Any]]) -> TemplateMessages:
    try:
        return TemplateMessages(
            type="template",
            template=[
                JudgeMessage(
                    role=m.get("role", "user"),
                    content=VARIABLE.sub(r"{{ item.vars.\1 }}", m["content"]),
                )
                for m in chat
            ],
        )
    except ValidationError as exc:
        raise PromptfooInvalid(
            tr("a prompt's messages cannot be read: {why}", why=exc.errors()[0]["msg"])
        ) from exc
