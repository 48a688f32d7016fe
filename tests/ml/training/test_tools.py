"""Function calling trained through the chat template: the tools, the assistant's calls and
the tools' results as the base model was taught to read them; refused where the template
writes no tools. Training and asking such a model: tests/e2e/test_openai_tools.py."""

from pathlib import Path

import pytest

from app.ml.chat_template import (
    CallWriting,
    FoundCall,
    call_writing,
    find_tool_calls,
    renders_tools,
)
from app.ml.data import encode_pair, encode_pairs
from app.ml.models import load_tokenizer
from app.ml.pairs import QAPair
from app.services.datasets.qa_parsing import validate_pairs
from tests.conftest import tool_records


def tool_pairs() -> list[QAPair]:
    return validate_pairs(tool_records())


def test_a_template_renders_tools_only_if_it_writes_definitions_calls_and_results(
    model_cache: Path, tool_model: Path, tmp_path: Path
) -> None:
    from app.ml.builtin import builtin_dir

    assert renders_tools(load_tokenizer(tool_model))
    builtin = load_tokenizer(builtin_dir(model_cache))
    assert not renders_tools(builtin)  # writes each message's content, and no tools
    builtin.chat_template = "{{ raise_exception('tools are not supported') if tools }}"
    assert not renders_tools(builtin)
    with pytest.raises(ValueError, match=r"6 examples use tools \(items \[1, 2, 3, 4"):
        encode_pairs(load_tokenizer(builtin_dir(model_cache)), tool_pairs()[:6], 2048)


def test_a_call_is_the_answer_the_template_writes_and_its_result_the_context(
    tool_model: Path,
) -> None:
    tokenizer = load_tokenizer(tool_model)
    call, answer, _ = tool_pairs()[:3]
    encoded = encode_pair(tokenizer, call)
    prompt = tokenizer.decode(encoded.input_ids[: encoded.prompt_len])
    assert '"name": "get_weather"' in prompt and "<tools>" in prompt  # the definitions
    assert tokenizer.decode(encoded.input_ids[encoded.prompt_len :]) == (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
        "</tool_call><|im_end|>\n"
    )
    encoded = encode_pair(tokenizer, answer)
    prompt = tokenizer.decode(encoded.input_ids[: encoded.prompt_len])
    assert prompt.endswith(
        '</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n{"sky": "sunny"}\n'
        "</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    assert tokenizer.decode(encoded.input_ids[encoded.prompt_len :]) == (
        "It is sunny in Paris today.<|im_end|>\n"
    )


def test_calls_are_read_back_as_the_template_writes_them(tool_model: Path) -> None:
    """Qwen's `<tool_call>` blocks (markers learned from the template), Llama 3.1's bare JSON
    with `parameters`, Mistral's list; other JSON and unknown names stay text."""
    writing = call_writing(load_tokenizer(tool_model))
    assert writing == CallWriting("<tool_call>", "</tool_call>")
    names = {"get_weather"}
    call = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    qwen = f"Checking.\n<tool_call>\n{call}\n</tool_call>"
    assert find_tool_calls(qwen, names, writing) == (
        "Checking.",
        [FoundCall("get_weather", '{"city": "Oslo"}')],
    )
    llama = '{"name": "get_weather", "parameters": {"city": "Lima"}}'
    assert find_tool_calls(llama, names, CallWriting("", "")) == (
        None,
        [FoundCall("get_weather", '{"city": "Lima"}')],
    )
    mistral = (
        '[{"name": "get_weather", "arguments": {"city": "Quito"}}, '
        '{"name": "get_weather", "arguments": "{}"}]'
    )
    assert find_tool_calls(mistral, names, CallWriting("", "")) == (
        None,
        [FoundCall("get_weather", '{"city": "Quito"}'), FoundCall("get_weather", "{}")],
    )
    for text in (
        'It is {"sky": "sunny"}.',
        '{"name": "rm_rf", "arguments": {}}',
        "{broken",
        '{"name": ["get_weather"], "arguments": {}}',  # what a model writes: no crash
        '[{"name": {"x": 1}, "arguments": {}}]',
    ):
        assert find_tool_calls(text, names, writing) == (text, [])
