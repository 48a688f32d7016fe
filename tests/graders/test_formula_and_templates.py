"""A multi grader's formula and the templates: OpenAI's vocabulary, nothing more."""

import pytest

from app.graders.formula import Formula, FormulaError
from app.graders.templates import MissingVariable, render, variables

NAMES = frozenset({"exact", "similar"})


def test_a_formula_computes_with_operators_and_functions() -> None:
    formula = Formula.parse("0.5 * exact + 0.5 * max(similar, 0.2) ^ 2", NAMES)
    assert formula.names == NAMES
    assert formula.evaluate({"exact": 1.0, "similar": 0.5}) == pytest.approx(0.5 + 0.5 * 0.25)
    assert Formula.parse("sqrt(abs(-4)) + floor(1.7) + ceil(0.2) + log(exp(1))", NAMES).evaluate(
        {}
    ) == pytest.approx(5.0)


@pytest.mark.parametrize(
    "text,words",
    [
        ("exact + other", "not one of the graders"),
        ("__import__('os').system('id')", "is none of those"),
        ("open('x')", "not one of min"),
        ("exact.__class__", "is none of those"),
        ("(lambda: 1)()", "is none of those"),
        ("[exact]", "is none of those"),
        ("exact if similar else 0", "is none of those"),
        ("'text'", "is none of those"),
        ("max()", "with nothing"),
        ("exact +", "is not a formula"),
        ("(" * 3000 + "1" + ")" * 3000, "longer than"),
    ],
)
def test_anything_else_is_refused_when_parsed(text: str, words: str) -> None:
    with pytest.raises(FormulaError, match=words):
        Formula.parse(text, NAMES)


def test_a_value_that_cannot_be_computed_is_an_error_not_a_crash() -> None:
    for text in ("exact / similar", "sqrt(exact - 1)", "10 ^ 10000", "(0 - 1) ^ 0.5"):
        with pytest.raises(FormulaError):
            Formula.parse(text, NAMES).evaluate({"exact": 0.0, "similar": 0.0})


def test_templates_render_paths_and_json() -> None:
    namespaces = {
        "item": {"answer": "Paris", "facts": [{"n": 3}], "a key": "x", "tags": ["a", "b"]},
        "sample": {"output_text": "It is Paris", "output_json": None},
    }
    text = (
        '{{ item.answer }}|{{item.facts[0].n}}|{{ item["a key"] }}|{{item.tags}}'
        "|{{sample.output_text}}"
    )
    assert render(text, namespaces) == 'Paris|3|x|["a", "b"]|It is Paris'


def test_a_missing_value_names_itself() -> None:
    with pytest.raises(MissingVariable, match="item has no 'reference'"):
        render("{{ item.reference }}", {"item": {"answer": "x"}})
    with pytest.raises(MissingVariable, match="not JSON"):
        render("{{ sample.output_json }}", {"sample": {"output_json": None}})


@pytest.mark.parametrize(
    "template,words",
    [("{{ items.answer }}", "must start with"), ("{{ sample.text }}", "no field of the sample"),
     ("{{ item.a..b }}", "cannot be read")],
)  # fmt: skip
def test_a_template_written_wrong_is_refused(template: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        variables(template)
