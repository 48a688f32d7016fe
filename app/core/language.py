"""The service's sentences in the language of the request they answer.

A sentence a user reads is written once, in English, as a template: `tr("Job {job_id} not
found", job_id=7)`. Answering a request whose `Accept-Language` asks for another language
this service speaks, the template is looked up in that language's catalogue
(app/core/locales/) and filled in there; anywhere else (the log, the CLI, the worker) and
for any template without a translation it stays English. The UI sends the language its
user chose, so its error boxes, field errors and the server's sentences follow it.

A sentence made where no request is answered and read later (why a run kept an earlier
epoch's weights, an export's progress) is kept as a `Sentence`, its template and values,
and put in the reader's language when a request shows it: `said(...)`, then `.text()`.
"""

from collections.abc import Mapping
from contextvars import ContextVar, Token
from functools import cache
from importlib import import_module
from typing import Union

from pydantic import BaseModel, ConfigDict

ENGLISH = "en"
# Every language with a catalogue, by its primary tag (zh-CN, zh-Hans, zh all ask for zh).
LANGUAGES = (ENGLISH, "zh")
CONTENT_LANGUAGE = {ENGLISH: "en", "zh": "zh-CN"}

_language: ContextVar[str] = ContextVar("language", default=ENGLISH)


def tr(template: str, /, **params: object) -> str:
    """`template` filled with `params`, in the language of the request being answered."""
    language = _language.get()
    if language != ENGLISH:
        template = catalogue(language).get(template, template)
    return template.format(**params) if params else template


# A value a sentence is filled with: a list of sentences reads as one, joined by "; ".
Value = Union[str, int, float, "Sentence", list["Sentence"]]


class Sentence(BaseModel):
    """A sentence kept to be read later, in whatever language its reader speaks."""

    model_config = ConfigDict(frozen=True)
    template: str
    values: dict[str, Value] = {}

    def text(self) -> str:
        """The sentence in the language in use (English outside a request)."""
        return tr(self.template, **{k: _filled(v, english=False) for k, v in self.values.items()})

    def english(self) -> str:
        """The sentence in English whoever is being answered (what the log and the
        database's plain-text columns keep). A NUL that a library's message quoted from the
        data becomes U+FFFD: PostgreSQL's text holds none, and the database refuses it."""
        filled = {k: _filled(v, english=True) for k, v in self.values.items()}
        text = self.template.format(**filled) if filled else self.template
        return text.replace("\x00", "\ufffd")

    def __str__(self) -> str:
        return self.text()


def _filled(value: Value, *, english: bool) -> str | int | float:
    if isinstance(value, Sentence):
        return value.english() if english else value.text()
    if isinstance(value, list):
        return ("; " if english else tr("; ")).join(str(_filled(v, english=english)) for v in value)
    return value


def said(template: str, /, **values: Value) -> Sentence:
    """`template` with `values`, kept to be put in its reader's language later."""
    return Sentence(template=template, values=values)


def text_of(value: "Sentence | str") -> str:
    """A stored text in the language in use: a sentence is put in it, plain text (what was
    stored before sentences were kept) is shown as it is."""
    return value.text() if isinstance(value, Sentence) else value


def shown(said: "Sentence | None", stored: str | None) -> str | None:
    """A column kept both ways: its sentence in the language in use, else its stored text
    (a row written before sentences were kept)."""
    return said.text() if said is not None else stored


def verbatim(text: str) -> Sentence:
    """Text that no catalogue holds (a library's exception, a user's own words), kept as a
    sentence to be shown as it is in every language."""
    return said("{text}", text=text)


def use_language(language: str) -> Token[str]:
    """Speak `language` in this context (a request) until `reset_language(token)`."""
    return _language.set(language if language in LANGUAGES else ENGLISH)


def reset_language(token: Token[str]) -> None:
    _language.reset(token)


def negotiate(accept_language: str) -> str:
    """The language this service speaks that an `Accept-Language` header prefers most
    (English when it names none of them): `zh-CN,zh;q=0.9,en;q=0.8` is zh."""
    ranked: list[tuple[float, int, str]] = []
    for position, part in enumerate(accept_language.split(",")[:20]):
        tag, _, parameters = part.strip().partition(";")
        primary = tag.strip().split("-")[0].lower()
        quality = 1.0
        if parameters.strip().startswith("q="):
            try:
                quality = float(parameters.strip()[2:])
            except ValueError:
                quality = 0.0
        if primary in LANGUAGES and quality > 0:
            ranked.append((-quality, position, primary))
    return min(ranked)[2] if ranked else ENGLISH


@cache
def catalogue(language: str) -> Mapping[str, str]:
    """English template -> the same sentence in `language` (app/core/locales/<language>.py)."""
    module = import_module(f"app.core.locales.{language}")
    table: Mapping[str, str] = module.CATALOGUE
    return table


def deferred(template: str) -> str:
    """Marks a template kept in a table and put through tr() when used, so the catalogue's
    test finds it with the others."""
    return template
