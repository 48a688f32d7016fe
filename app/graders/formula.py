"""A multi grader's `calculate_output`: arithmetic over its graders' rewards, never `eval`.

OpenAI's vocabulary: numbers, the graders' names, `+ - * / ^` (a power) and parentheses,
and min, max, abs, floor, ceil, exp, sqrt, log. The formula is parsed once (`Formula.parse`)
into Python's syntax tree, of which only those nodes are taken; evaluating walks the tree.
"""

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

MAX_LENGTH = 2000  # characters: deeper nesting than a person writes is refused, not parsed
FUNCTIONS: dict[str, Callable[..., float]] = {
    "min": min,
    "max": max,
    "abs": abs,
    "floor": math.floor,
    "ceil": math.ceil,
    "exp": math.exp,
    "sqrt": math.sqrt,
    "log": math.log,
}
OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a**b,
}


class FormulaError(ValueError):
    """A formula that cannot be read, or whose value cannot be computed."""


@dataclass(frozen=True)
class Formula:
    text: str
    tree: ast.expr
    names: frozenset[str]  # the graders it reads

    @classmethod
    def parse(cls, text: str, known: frozenset[str]) -> "Formula":
        if len(text) > MAX_LENGTH:
            raise FormulaError(f"calculate_output is longer than {MAX_LENGTH} characters")
        try:
            # ^ is a power, binding as tightly as Python's ** (no string can hold a ^ here)
            tree = ast.parse(text.strip().replace("^", "**"), mode="eval").body
        except (SyntaxError, RecursionError, MemoryError) as exc:
            raise FormulaError(f"calculate_output {text[:100]!r} is not a formula: {exc}") from exc
        names = _check(tree, known)
        return cls(text, tree, frozenset(names))

    def evaluate(self, values: Mapping[str, float]) -> float:
        try:
            result = float(_value(self.tree, values))
        except (ArithmeticError, ValueError, TypeError) as exc:
            raise FormulaError(f"calculate_output could not be computed: {exc}") from exc
        if not math.isfinite(result):
            raise FormulaError(f"calculate_output is {result}, not a number")
        return result


def _check(node: ast.expr, known: frozenset[str]) -> set[str]:
    """The names the tree reads; FormulaError for anything outside the vocabulary."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return set()
    if isinstance(node, ast.Name):
        if node.id not in known:
            raise FormulaError(
                f"calculate_output names {node.id!r}, which is not one of the graders ("
                + ", ".join(sorted(known))
                + ")"
            )
        return {node.id}
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return _check(node.left, known) | _check(node.right, known)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _check(node.operand, known)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id not in FUNCTIONS:
            raise FormulaError(
                f"calculate_output calls {node.func.id}(), which is not one of "
                + ", ".join(FUNCTIONS)
            )
        if not node.args:
            raise FormulaError(f"calculate_output calls {node.func.id}() with nothing")
        names: set[str] = set()
        for arg in node.args:
            names |= _check(arg, known)
        return names
    raise FormulaError(
        f"calculate_output may use numbers, the graders' names, + - * / ^, parentheses and "
        f"{', '.join(FUNCTIONS)}; {ast.unparse(node)[:60]!r} is none of those"
    )


def _value(node: ast.expr, values: Mapping[str, float]) -> float:
    if isinstance(node, ast.Constant):
        assert isinstance(node.value, int | float)  # _check let no other constant through
        return float(node.value)
    if isinstance(node, ast.Name):
        return values[node.id]
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left, values), _value(node.right, values)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise ValueError("an exponent past 1000")
        return OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp):
        operand = _value(node.operand, values)
        return -operand if isinstance(node.op, ast.USub) else operand
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    return float(FUNCTIONS[node.func.id](*(_value(arg, values) for arg in node.args)))
