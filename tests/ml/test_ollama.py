"""The Modelfile's TEMPLATE, rendered by Go's text/template as Ollama renders it, gives the
prompt the chat template gives, token for token; templates it cannot translate are left to
Ollama and said so."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from app.ml.builtin import ensure_builtin_model
from app.ml.export.ollama import modelfile

RENDER_GO = Path(__file__).parent / "ollama" / "render.go"
LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
QWEN25 = (  # a default system prompt when the conversation has none
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]"
    "['content'] + '<|im_end|>\n' }}{%- else %}{{- '<|im_start|>system\nYou are Qwen, created "
    "by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}{%- endif %}{%- for message "
    "in messages %}{%- if (message.role == 'user') or (message.role == 'system' and not "
    "loop.first) or (message.role == 'assistant') %}{{- '<|im_start|>' + message.role + '\n' + "
    "message.content + '<|im_end|>' + '\n' }}{%- endif %}{%- endfor %}{%- if "
    "add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"
)
GEMMA_LIKE = (  # folds the system prompt into the first user turn: no per-message frame
    "{% for m in messages %}{% if m['role'] == 'system' %}{% set sys = m['content'] %}"
    "{% else %}<start_of_turn>{{ m['role'] }}\n{% if loop.index0 == 1 %}{{ messages[0]"
    "['content'] }}\n\n{% endif %}{{ m['content'] }}<end_of_turn>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
QWEN25_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
CONVERSATION = [
    {"role": "user", "content": "Wie lautet der Code für Tor 4?"},
    {"role": "assistant", "content": "K-7731, gültig bis Freitag."},
    {"role": "user", "content": "退货政策是什么？ {{ not a template }}"},
]


@pytest.fixture(scope="module")
def render_go(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("go") is None:
        pytest.skip("Go is not installed (scripts/test.sh installs Debian's golang-go)")
    binary = tmp_path_factory.mktemp("go") / "render"
    subprocess.run(["go", "build", "-o", str(binary), str(RENDER_GO)], check=True, timeout=300)
    return binary


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(ensure_builtin_model(tmp_path_factory.mktemp("models")))


def parse(text: str) -> dict[str, list[str]]:
    """Modelfile commands as Ollama's parser reads them (the forms modelfile() writes)."""
    found: dict[str, list[str]] = {}
    pattern = r'^(FROM|TEMPLATE|SYSTEM|PARAMETER) (?:"""(.*?)"""|(.*?))$'
    for match in re.finditer(pattern, text, flags=re.M | re.S):
        found.setdefault(match[1], []).append(match[2] if match[2] is not None else match[3])
    return found


def ollama_prompt(render_go: Path, commands: dict[str, list[str]], messages: list) -> str:
    """What Ollama sends the model: the Modelfile's SYSTEM first unless the chat has one."""
    if "SYSTEM" in commands and messages[0]["role"] != "system":
        messages = [{"role": "system", "content": commands["SYSTEM"][0]}, *messages]
    request = json.dumps({"template": commands["TEMPLATE"][0], "messages": messages})
    done = subprocess.run(
        [str(render_go)], input=request, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


@pytest.mark.parametrize("system_prompt", [None, "Answer from the Gate 4 FAQ only."])
def test_the_template_renders_the_training_prompt_token_for_token(
    render_go: Path, tokenizer: PreTrainedTokenizerBase, system_prompt: str | None
) -> None:
    commands = parse(modelfile("model-f16.gguf", tokenizer, system_prompt=system_prompt))
    assert commands["FROM"] == ["./model-f16.gguf"]
    assert 'stop "<|im_end|>"' in commands["PARAMETER"]
    assert commands.get("SYSTEM") == ([system_prompt] if system_prompt else None)
    trained = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for turns in (CONVERSATION[:1], CONVERSATION):
        expected = tokenizer.apply_chat_template(
            trained + turns, add_generation_prompt=True, tokenize=False
        )
        assert isinstance(expected, str)
        prompt = ollama_prompt(render_go, commands, turns)
        tokens = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert tokens == tokenizer(expected, add_special_tokens=False)["input_ids"]


@pytest.mark.parametrize(
    ("template", "stop", "system"),
    [
        (LLAMA3, "<|eot_id|>", None),
        (
            QWEN25,
            "<|im_end|>",
            "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
        ),
    ],
)
def test_other_families_translate_with_their_stops_and_default_system(
    render_go: Path,
    tokenizer: PreTrainedTokenizerBase,
    template: str,
    stop: str,
    system: str | None,
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer.name_or_path)  # a copy to change
    tokenizer.add_special_tokens(
        {"bos_token": "<|begin_of_text|>", "additional_special_tokens": ["<|eot_id|>"]}
    )
    tokenizer.eos_token = stop
    tokenizer.chat_template = template
    commands = parse(modelfile("m.gguf", tokenizer, system_prompt=None))
    assert commands.get("SYSTEM") == ([system] if system else None)
    assert f'stop "{stop}"' in commands["PARAMETER"]
    expected = tokenizer.apply_chat_template(
        CONVERSATION, add_generation_prompt=True, tokenize=False
    )
    assert isinstance(expected, str)
    expected = expected.removeprefix("<|begin_of_text|>")  # llama.cpp adds the BOS itself
    assert ollama_prompt(render_go, commands, CONVERSATION) == expected


def test_a_template_that_is_not_per_message_is_left_to_ollama_and_said_so(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer.name_or_path)
    tokenizer.chat_template = GEMMA_LIKE
    text = modelfile("m.gguf", tokenizer, system_prompt="Be brief.")
    assert "TEMPLATE" not in parse(text)
    assert "# No TEMPLATE: the model's chat template could not be translated" in text
    assert parse(text)["SYSTEM"] == ["Be brief."]
