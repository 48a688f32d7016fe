"""Chat and text completions as OpenAI's API has them (and vLLM's server, for `ignore_eos`).

Requests ignore fields they do not know; the ones qatune cannot honour (logprobs, tools
on a text completion, a forced tool choice) are refused with a 400
(`refuse_what_is_not_served`) rather than silently dropped.
"""

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.errors import BadRequest
from app.core.language import tr
from app.schemas.common import MAX_JSON_INT

Stop = Annotated[str, Field(min_length=1, max_length=200)]
Text = Annotated[str, Field(max_length=200_000)]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["text"]
    text: Text


Name = Annotated[str, Field(min_length=1, max_length=200)]


class FunctionCall(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: Name
    arguments: Annotated[str, Field(max_length=200_000)]  # JSON text


class ToolCall(BaseModel):
    """A call the assistant made: in a conversation sent back, and in an answer."""

    model_config = ConfigDict(extra="ignore")

    id: Annotated[str, Field(max_length=200)]
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | Annotated[list[TextPart], Field(max_length=100)] | None = None
    tool_calls: Annotated[list[ToolCall], Field(max_length=128)] | None = None  # an assistant's
    tool_call_id: Annotated[str, Field(max_length=200)] | None = None  # a tool result's

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class FunctionDefinition(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: Name
    description: Annotated[str, Field(max_length=20_000)] | None = None
    parameters: dict[str, Any] | None = None


class Tool(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["function"]
    function: FunctionDefinition


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class SamplingFields(BaseModel):
    """What chat and text completions share."""

    model_config = ConfigDict(extra="ignore")

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
    # Not served: refused with a clear 400 (refuse_what_is_not_served) unless absent,
    # null, false or empty, as the schema says.
    logprobs: Any = Field(
        default=None, json_schema_extra={"anyOf": [{"const": False}, {"type": "null"}]}
    )

    def refuse_what_is_not_served(self) -> None:
        if self.logprobs is not None and self.logprobs is not False:
            raise BadRequest(
                tr("qatune does not return logprobs; leave 'logprobs' unset"),
                param="logprobs",
            )

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

    def refuse_what_is_not_served(self) -> None:
        super().refuse_what_is_not_served()
        if self.tools is not None and self.tools != []:
            raise BadRequest(
                tr("A text completion calls no tools; send them to /v1/chat/completions"),
                param="tools",
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
