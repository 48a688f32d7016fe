"""Chat and text completions as OpenAI's API has them (and vLLM's server, for `ignore_eos`).

A field a request does not know is a 400 that names it, with the field it was likely meant
to be (`max_token`: did you mean max_tokens?): ignored, a misspelt one changed the answer
without a word. OpenAI's fields that qatune takes but cannot act on (`NOT_SERVED`) are
taken with the values that ask for nothing, and any other value is a 400 saying what to
do, rather than silently dropped.
"""

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.core.errors import BadRequest
from app.core.language import deferred, tr
from app.schemas.common import MAX_JSON_INT


@dataclass(frozen=True)
class NotServed:
    """One of OpenAI's request fields that qatune has no use for: null, or one of
    `neutral` (the values that ask for nothing), is taken; anything else is refused."""

    neutral: tuple[Any, ...]
    why: str  # the 400's words, a template

    def field(self) -> Any:
        """The field's declaration: the schema lists only the values that are taken."""
        choices = [{"const": value} for value in self.neutral]
        return Field(default=None, json_schema_extra={"anyOf": [*choices, {"type": "null"}]})

    def takes(self, value: Any) -> bool:
        return value is None or any(  # false is not 0 here, though Python says it is
            value == neutral and isinstance(value, bool) == isinstance(neutral, bool)
            for neutral in self.neutral
        )


NOT_SERVED = {
    "logprobs": NotServed(
        (False,), deferred("qatune does not return logprobs; leave 'logprobs' unset")
    ),
    "top_logprobs": NotServed(
        (0,), deferred("qatune does not return logprobs; leave 'top_logprobs' unset")
    ),
    "frequency_penalty": NotServed(
        (0,), deferred("qatune samples without penalties; leave 'frequency_penalty' unset or 0")
    ),
    "presence_penalty": NotServed(
        (0,), deferred("qatune samples without penalties; leave 'presence_penalty' unset or 0")
    ),
    "logit_bias": NotServed(
        ({},), deferred("qatune samples without a logit bias; leave 'logit_bias' unset")
    ),
    "response_format": NotServed(
        ({"type": "text"},),
        deferred(
            "qatune cannot hold an answer to a JSON format; leave 'response_format' unset or of "
            "type text"
        ),
    ),
    "modalities": NotServed(
        (["text"],),
        deferred("qatune's models answer in text only; leave 'modalities' unset or text alone"),
    ),
    "audio": NotServed((), deferred("qatune's models answer in text only; leave 'audio' unset")),
    "prediction": NotServed(
        (), deferred("qatune takes no predicted output; leave 'prediction' unset")
    ),
    "web_search_options": NotServed(
        (), deferred("qatune's models do not search the web; leave 'web_search_options' unset")
    ),
    "reasoning_effort": NotServed(
        (), deferred("No model served here reasons; leave 'reasoning_effort' unset")
    ),
    "verbosity": NotServed(
        (), deferred("qatune cannot set an answer's verbosity; leave 'verbosity' unset")
    ),
    "store": NotServed(
        (False,), deferred("qatune stores no completions; leave 'store' unset or false")
    ),
    "functions": NotServed(
        (), deferred("'functions' is OpenAI's older form of tools; send 'tools' instead")
    ),
    "function_call": NotServed(
        (),
        deferred(
            "'function_call' is OpenAI's older form of tool_choice; send 'tool_choice' instead"
        ),
    ),
    "echo": NotServed(
        (False,), deferred("qatune does not echo the prompt; leave 'echo' unset or false")
    ),
    "suffix": NotServed(
        ("",), deferred("qatune does not complete around a suffix; leave 'suffix' unset")
    ),
    "best_of": NotServed(
        (1,), deferred("qatune returns every answer it samples; leave 'best_of' unset and set 'n'")
    ),
}

Stop = Annotated[str, Field(min_length=1, max_length=200)]
Text = Annotated[str, Field(max_length=200_000)]


class OpenAIShape(BaseModel):
    """A request's object as OpenAI's API has it: a field OpenAI does not know is a 400."""

    model_config = ConfigDict(extra="forbid")


# OpenAI's content parts that are not text (chat messages', and the Responses API's).
MEDIA_PARTS = frozenset({"image_url", "input_audio", "file", "input_image", "input_file"})


class TextPart(OpenAIShape):
    type: Literal["text"]
    text: Text


Name = Annotated[str, Field(min_length=1, max_length=200)]


class FunctionCall(OpenAIShape):
    name: Name
    arguments: Annotated[str, Field(max_length=200_000)]  # JSON text


class ToolCall(OpenAIShape):
    """A call the assistant made: in a conversation sent back, and in an answer."""

    id: Annotated[str, Field(max_length=200)]
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(OpenAIShape):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | Annotated[list[TextPart], Field(max_length=100)] | None = None
    tool_calls: Annotated[list[ToolCall], Field(max_length=128)] | None = None  # an assistant's
    tool_call_id: Annotated[str, Field(max_length=200)] | None = None  # a tool result's
    # What OpenAI's answers carry and a script sends back with the conversation: taken,
    # and not used (no chat template here writes a speaker's name).
    name: Name | None = None
    refusal: Annotated[str, Field(max_length=200_000)] | None = None
    annotations: list[Any] | None = None
    audio: None = None
    function_call: None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text_only(cls, content: Any) -> Any:
        """An image, audio or file part is told so, not that it is not a text part."""
        for index, part in enumerate(content if isinstance(content, list) else ()):
            kind = part.get("type") if isinstance(part, dict) else None
            if isinstance(kind, str) and kind in MEDIA_PARTS:
                raise ValueError(
                    tr(
                        "part {index} is {kind}: qatune's models read text only; send the "
                        "content as text",
                        index=index,
                        kind=kind,
                    )
                )
        return content

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class FunctionDefinition(OpenAIShape):
    name: Name
    description: Annotated[str, Field(max_length=20_000)] | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None  # OpenAI's schema-exact calls; qatune parses what it gets


class Tool(OpenAIShape):
    type: Literal["function"]
    function: FunctionDefinition


class StreamOptions(OpenAIShape):
    include_usage: bool = False
    include_obfuscation: bool | None = None  # qatune pads no chunks


class SamplingFields(OpenAIShape):
    """What chat and text completions share."""

    model: str = Field(min_length=1, max_length=500)
    max_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    n: Annotated[int, Field(ge=1, le=16)] = 1
    stop: Stop | Annotated[list[Stop], Field(max_length=4)] | None = None
    seed: Annotated[int, Field(ge=-MAX_JSON_INT, le=MAX_JSON_INT)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = Field(
        default=False, description="vLLM's option: generate max_tokens, even past the end"
    )
    user: Annotated[str, Field(max_length=500)] | None = None  # OpenAI's; not used here
    # Not served (NOT_SERVED): a 400 unless they ask for nothing.
    logprobs: Any = NOT_SERVED["logprobs"].field()
    frequency_penalty: Any = NOT_SERVED["frequency_penalty"].field()
    presence_penalty: Any = NOT_SERVED["presence_penalty"].field()
    logit_bias: Any = NOT_SERVED["logit_bias"].field()

    def refuse_what_is_not_served(self) -> None:
        for name, rule in NOT_SERVED.items():
            if name in type(self).model_fields and not rule.takes(getattr(self, name)):
                raise BadRequest(tr(rule.why), param=name)

    @property
    def stops(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)


class ChatCompletionCreate(SamplingFields):
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=1000)]
    max_completion_tokens: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    # Function calling: the tools are written into the prompt by the model's chat template,
    # and the calls found in the answer come back as `tool_calls`. The model calls when it
    # learned to ("auto"); a call cannot be forced ("required" or a named function: a 400).
    tools: Annotated[list[Tool], Field(max_length=128)] | None = None
    tool_choice: Any = Field(default=None, json_schema_extra={"enum": ["auto", "none", None]})
    parallel_tool_calls: bool | None = None
    # OpenAI's, taken and not used: they change nothing in an answer.
    metadata: (
        Annotated[dict[str, Annotated[str, Field(max_length=512)]], Field(max_length=16)] | None
    ) = None
    service_tier: Annotated[str, Field(max_length=40)] | None = None
    safety_identifier: Annotated[str, Field(max_length=500)] | None = None
    prompt_cache_key: Annotated[str, Field(max_length=500)] | None = None
    prompt_cache_retention: Annotated[str, Field(max_length=40)] | None = None
    # Not served (NOT_SERVED): a 400 unless they ask for nothing.
    top_logprobs: Any = NOT_SERVED["top_logprobs"].field()
    response_format: Any = NOT_SERVED["response_format"].field()
    modalities: Any = NOT_SERVED["modalities"].field()
    audio: Any = NOT_SERVED["audio"].field()
    prediction: Any = NOT_SERVED["prediction"].field()
    web_search_options: Any = NOT_SERVED["web_search_options"].field()
    reasoning_effort: Any = NOT_SERVED["reasoning_effort"].field()
    verbosity: Any = NOT_SERVED["verbosity"].field()
    store: Any = NOT_SERVED["store"].field()
    functions: Any = NOT_SERVED["functions"].field()
    function_call: Any = NOT_SERVED["function_call"].field()

    def refuse_what_is_not_served(self) -> None:
        super().refuse_what_is_not_served()
        if self.tool_choice not in (None, "auto", "none"):
            raise BadRequest(
                tr(
                    "qatune cannot force a tool call: send tool_choice 'auto' (the model calls "
                    "when it learned to) or 'none'"
                ),
                param="tool_choice",
            )

    def tool_definitions(self) -> list[dict[str, Any]] | None:
        """The tools as a chat template takes them; None with tool_choice 'none'."""
        if not self.tools or self.tool_choice == "none":
            return None
        return [tool.model_dump(exclude_none=True) for tool in self.tools]


Prompt = Annotated[str, Field(min_length=1, max_length=200_000)]  # an empty one has no tokens


class CompletionCreate(SamplingFields):
    prompt: Prompt | Annotated[list[Prompt], Field(min_length=1, max_length=16)]
    tools: Any = Field(
        default=None,
        json_schema_extra={"anyOf": [{"type": "array", "maxItems": 0}, {"type": "null"}]},
    )
    # Not served (NOT_SERVED): a 400 unless they ask for nothing.
    echo: Any = NOT_SERVED["echo"].field()
    suffix: Any = NOT_SERVED["suffix"].field()
    best_of: Any = NOT_SERVED["best_of"].field()

    @field_validator("prompt", mode="before")
    @classmethod
    def _text_not_tokens(cls, prompt: Any) -> Any:
        """OpenAI takes token ids too; they are told to send the text, not that a list of
        numbers is not a list of texts."""
        if isinstance(prompt, list) and prompt and _token_ids(prompt):
            raise ValueError(tr("qatune takes a prompt as text, not token ids; send the text"))
        return prompt

    def refuse_what_is_not_served(self) -> None:
        super().refuse_what_is_not_served()
        if self.tools is not None and self.tools != []:
            raise BadRequest(
                tr("A text completion calls no tools; send them to /v1/chat/completions"),
                param="tools",
            )


def _token_ids(prompt: list[Any]) -> bool:
    """OpenAI's prompts of token ids: a list of them, or a list of such lists."""

    def token(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    return all(
        token(item) or (isinstance(item, list) and bool(item) and all(map(token, item)))
        for item in prompt
    )


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCall] | None = None
    refusal: None = None  # OpenAI's; qatune's models have no refusal channel


FinishReason = Literal["stop", "length", "tool_calls"]


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    finish_reason: FinishReason
    logprobs: None = None


class Unset(BaseModel):
    """OpenAI's fields that have no value here, null as OpenAI sends them when unset: its
    client's types list them, and a script may read them."""

    system_fingerprint: None = None
    service_tier: None = None
    moderation: None = None


class ChatCompletion(Unset):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    metadata: None = None


class DeltaToolCall(ToolCall):
    index: int  # OpenAI's stream numbers the calls of a choice


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[DeltaToolCall] | None = None


class ChunkChoice(BaseModel):
    index: int
    delta: Delta
    finish_reason: FinishReason | None = None
    logprobs: None = None


class ChatCompletionChunk(Unset):
    obfuscation: None = None  # OpenAI pads its chunks against length side channels; unset
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = None


class TextChoice(BaseModel):
    index: int
    text: str
    finish_reason: FinishReason | None = None
    logprobs: None = None


class Completion(BaseModel):
    """A whole text completion, or (with `usage` None until the end) one streamed chunk."""

    system_fingerprint: None = None  # OpenAI's, unset
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[TextChoice]
    usage: Usage | None = None
