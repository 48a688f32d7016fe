"""`qatune train`'s hyperparameter options, made from the API's own vocabulary: one option a
field of HyperparameterRequest, named as the API names it, with the field's description
as its help; the values are checked by the same model, so the CLI and the API agree."""

import argparse
import types
import typing
from typing import Any, Literal

from app.ml.hyperparameters import HyperparameterRequest

ALIASES = {"lora_r": ["--lora-rank"]}  # older spellings still accepted
PREFIX = "hp_"  # the options' names in the parsed arguments


def add_hyperparameter_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("hyperparameters (as the API names them; auto when left out)")
    for name, field in HyperparameterRequest.model_fields.items():
        choices = _literal_values(field.annotation)
        only_literals = choices is not None and not _takes(field.annotation, int, float, list)
        group.add_argument(
            f"--{name.replace('_', '-')}",
            *ALIASES.get(name, []),
            dest=PREFIX + name,
            metavar=None if only_literals else "VALUE",
            choices=choices if only_literals else None,
            help=field.description,
        )


def hyperparameters_given(args: argparse.Namespace) -> dict[str, Any]:
    """The options given, for HyperparameterRequest.model_validate (which checks them)."""
    given: dict[str, Any] = {}
    for name, field in HyperparameterRequest.model_fields.items():
        value = getattr(args, PREFIX + name)
        if value is None:
            continue
        if _takes(field.annotation, list) and value not in (
            _literal_values(field.annotation) or ()
        ):
            value = [part.strip() for part in value.split(",")]  # a,b,c
        given[name] = value
    return given


def _literal_values(annotation: Any) -> list[str] | None:
    literals = [arg for arg in _flatten(annotation) if typing.get_origin(arg) is Literal]
    return [str(value) for arg in literals for value in typing.get_args(arg)] or None


def _takes(annotation: Any, *kinds: type) -> bool:
    return any(arg in kinds or typing.get_origin(arg) in kinds for arg in _flatten(annotation))


def _flatten(annotation: Any) -> list[Any]:
    """The members of a union, with Annotated[...] unwrapped."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _flatten(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [member for arg in typing.get_args(annotation) for member in _flatten(arg)]
    return [annotation]
