"""An Ollama `Modelfile` whose TEMPLATE is the chat template the job trained with.

Ollama templates are Go templates; the model's is Jinja. Rather than keep a table of known
models, the Jinja template is rendered for probe conversations whose contents are unique
markers, which reads off what it writes around each role's message (`RoleFrame`), the
generation prompt and any default system prompt. Those become a Go template, which is then
checked against the Jinja one on a longer conversation: a template that does more than wrap
each message (merging turns, rewriting content) is not translated, and the Modelfile says
so (Ollama then guesses from the GGUF's own chat template).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class RoleFrame:
    head: str  # written before a message's content
    foot: str  # and after it


@dataclass(frozen=True)
class ChatFormat:
    """A chat template as Ollama needs it: how each role is framed, what asks for an answer."""

    frames: dict[str, RoleFrame]
    generation_prompt: str
    default_system: str | None  # the template's own system prompt when none is given

    def render(self, messages: Sequence[dict[str, str]]) -> str:
        """What the Go template renders (the same logic, for the consistency check)."""
        frames = self.frames
        body = "".join(
            f"{frames[m['role']].head}{m['content']}{frames[m['role']].foot}" for m in messages
        )
        return body + self.generation_prompt

    def go_template(self) -> str:
        branches = "{{ else if ".join(
            f'eq .Role "{role}" }}}}{frame.head}{{{{ .Content }}}}{frame.foot}'
            for role, frame in self.frames.items()
        )
        return (
            f"{{{{ range .Messages }}}}{{{{ if {branches}{{{{ end }}}}{{{{ end }}}}"
            f"{self.generation_prompt}"
        )


class TemplateNotTranslatable(Exception):
    """The chat template does more than frame each message; the reason says what."""


def read_chat_format(tokenizer: "PreTrainedTokenizerBase") -> ChatFormat:
    """Read the frames off the tokenizer's chat template (see the module's docstring)."""

    def render(*roles: str, generate: bool = False) -> tuple[str, list[str]]:
        markers = [f"⟦{i}{role[0].upper()}⟧" for i, role in enumerate(roles)]
        text = tokenizer.apply_chat_template(
            [{"role": r, "content": m} for r, m in zip(roles, markers, strict=True)],
            tokenize=False,
            add_generation_prompt=generate,
        )
        assert isinstance(text, str)
        bos = tokenizer.bos_token
        if bos and text.startswith(bos):  # llama.cpp and Ollama add it themselves
            text = text[len(bos) :]
        pieces, rest = [], text
        for marker in markers:
            before, found, rest = rest.partition(marker)
            if not found:
                raise TemplateNotTranslatable("it does not write each message's content as is")
            pieces.append(before)
        return rest, pieces

    try:
        foot_user, _ = render("user")
        generated, _ = render("user", generate=True)
        foot_assistant, (_, between_ua) = render("user", "assistant")
        _, (preamble, _, between_au) = render("user", "assistant", "user")
        _, (head_system, between_su) = render("system", "user")
    except TemplateNotTranslatable:
        raise
    except Exception as exc:  # the template raised: e.g. it insists on alternating roles
        raise TemplateNotTranslatable(f"it cannot render a plain conversation ({exc})") from exc
    head_user = _after(between_au, foot_assistant)
    frames = {
        "system": RoleFrame(head_system, _before(between_su, head_user)),
        "user": RoleFrame(head_user, foot_user),
        "assistant": RoleFrame(_after(between_ua, foot_user), foot_assistant),
    }
    default_system = None
    if preamble != head_user:  # something came before the first user message: a default
        system = frames["system"]
        inner = _before(preamble, head_user)
        if not (inner.startswith(system.head) and inner.endswith(system.foot)):
            raise TemplateNotTranslatable("it writes something before the first message")
        default_system = inner[len(system.head) : len(inner) - len(system.foot)]
    chat = ChatFormat(frames, _after(generated, foot_user), default_system)
    _check(tokenizer, chat)
    return chat


def _after(text: str, prefix: str) -> str:
    if not text.startswith(prefix):
        raise TemplateNotTranslatable("its messages' frames depend on their neighbours")
    return text[len(prefix) :]


def _before(text: str, suffix: str) -> str:
    if not text.endswith(suffix):
        raise TemplateNotTranslatable("its messages' frames depend on their neighbours")
    return text[: len(text) - len(suffix)]


def _check(tokenizer: "PreTrainedTokenizerBase", chat: ChatFormat) -> None:
    conversation = [
        {"role": "system", "content": "Answer from the FAQ."},
        {"role": "user", "content": "What is the code?"},
        {"role": "assistant", "content": "It is K-7."},
        {"role": "user", "content": "在哪里？"},
        {"role": "assistant", "content": "二楼。"},
        {"role": "user", "content": "Thanks"},
    ]
    expected = tokenizer.apply_chat_template(
        conversation, tokenize=False, add_generation_prompt=True
    )
    assert isinstance(expected, str)
    if tokenizer.bos_token:
        expected = expected.removeprefix(tokenizer.bos_token)
    if chat.render(conversation) != expected:
        raise TemplateNotTranslatable("a longer conversation renders differently")
    for frame in chat.frames.values():
        if "{{" in frame.head + frame.foot or '"""' in frame.head + frame.foot:
            raise TemplateNotTranslatable("its text would need escaping in a Go template")


def stop_words(tokenizer: "PreTrainedTokenizerBase", chat: ChatFormat | None) -> list[str]:
    """The end-of-turn tokens: the special tokens closing an answer, and the EOS token."""
    specials = [t for t in tokenizer.all_special_tokens if t]
    stops = [t for t in specials if chat and t in chat.frames["assistant"].foot]
    if tokenizer.eos_token and tokenizer.eos_token not in stops:
        stops.append(tokenizer.eos_token)
    return stops


def modelfile(
    gguf_name: str,
    tokenizer: "PreTrainedTokenizerBase",
    *,
    system_prompt: str | None,
) -> str:
    """The Modelfile text: FROM the GGUF, TEMPLATE, stops, SYSTEM, greedy like qatune."""
    lines = [
        "# Ollama: `ollama create my-faq -f Modelfile`, then `ollama run my-faq`.",
        f"FROM ./{gguf_name}",
    ]
    try:
        chat: ChatFormat | None = read_chat_format(tokenizer)
    except TemplateNotTranslatable as exc:
        chat = None
        lines.append(
            f"# No TEMPLATE: the model's chat template could not be translated ({exc}); "
            "Ollama guesses one from the GGUF's tokenizer.chat_template."
        )
    if chat is not None:
        lines.append(f'TEMPLATE """{chat.go_template()}"""')
    for stop in stop_words(tokenizer, chat):
        lines.append(f"PARAMETER stop {_quoted(stop)}")
    lines.append("# qatune answers greedily: the trained answers come back word for word.")
    lines.append("PARAMETER temperature 0")
    system = system_prompt or (chat.default_system if chat else None)
    if system:  # triple quotes keep newlines; a prompt that holds some is escaped instead
        lines.append(
            f'SYSTEM """{system}"""' if '"""' not in system else f"SYSTEM {_quoted(system)}"
        )
    return "\n".join(lines) + "\n"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
