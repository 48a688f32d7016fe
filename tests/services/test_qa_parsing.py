import gzip
import io
import json
import tracemalloc
import zipfile

import pytest

from app.core.errors import ValidationFailed
from app.ml.pairs import QAPair, ToolCall, Turn
from app.services.datasets.qa_parsing import parse_qa_bytes, read_jsonl, validate_pairs, write_jsonl


def problems(content: bytes, filename: str = "qa.jsonl", **kwargs: int) -> list[dict[str, object]]:
    with pytest.raises(ValidationFailed) as caught:
        parse_qa_bytes(content, filename=filename, **kwargs)
    return caught.value.details


def test_jsonl_alpaca_chat_and_csv_are_normalized() -> None:
    jsonl = (
        b'{"question": " Q1 ", "answer": "A1"}\n\n'
        b'{"instruction": "Do", "input": "x", "output": "O"}\n'
    )
    chat = json.dumps(
        [
            {
                "messages": [
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "Hello"},
                ]
            }
        ]
    ).encode()
    csv = '\ufeffquestion,answer\n"Q, with comma",A\n中文问题,中文答案\n'.encode()
    assert parse_qa_bytes(jsonl, filename="a.jsonl").pairs == [
        QAPair("Q1", "A1"),
        QAPair("Do\n\nx", "O"),
    ]
    assert parse_qa_bytes(chat, filename="c.json").pairs == [QAPair("Hi", "Hello")]
    parsed = parse_qa_bytes(csv, filename="d.csv")
    assert parsed.format == "csv"
    assert parsed.pairs == [QAPair("Q, with comma", "A"), QAPair("中文问题", "中文答案")]


def test_format_is_detected_without_an_extension() -> None:
    assert parse_qa_bytes(b'[{"question":"q","answer":"a"}]').format == "json"
    assert parse_qa_bytes(b'{"question":"q","answer":"a"}').format == "jsonl"
    assert parse_qa_bytes(b"question,answer\nq,a\n").format == "csv"


def test_every_bad_line_is_reported_with_its_number_and_field() -> None:
    content = b"\n".join(
        [
            b'{"question": "ok", "answer": "fine"}',
            b'{"question": "no answer"}',
            b"{not json",
            b'{"question": "q", "answer": "   "}',
            b'{"question": 3, "answer": "a"}',
            b'["a list"]',
            b'{"prompt": "x"}',
        ]
    )
    found = problems(content)
    assert [(p["line"], p["field"]) for p in found] == [
        (2, "answer"),
        (3, None),
        (4, "answer"),
        (5, "question"),
        (6, None),
        (7, "completion"),  # a prompt is half of TRL's prompt/completion record
    ]
    assert "missing" in str(found[0]["message"])
    assert "invalid JSON" in str(found[1]["message"])
    assert "empty" in str(found[2]["message"])


def test_non_utf8_names_the_line() -> None:
    found = problems(b'{"question": "a", "answer": "b"}\n{"question": "\xff", "answer": "b"}\n')
    assert found[0]["line"] == 2 and "UTF-8" in str(found[0]["message"])


def test_a_spreadsheets_export_is_read_with_its_own_delimiter_and_encoding() -> None:
    """Excel writes ';' where a comma is the decimal mark, and "Unicode Text" as
    tab-separated UTF-16 with a byte-order mark; the header says which delimiter it is."""
    pairs = [QAPair("Preis?", "3,50 €"), QAPair("Öffnungszeiten; heute?", "9–17")]
    semicolons = 'Question;Answer\r\nPreis?;3,50 €\r\n"Öffnungszeiten; heute?";9–17\r\n'
    tabs = "question\tanswer\nPreis?\t3,50 €\nÖffnungszeiten; heute?\t9–17\n"
    assert parse_qa_bytes(semicolons.encode(), filename="faq.csv").pairs == pairs
    assert parse_qa_bytes(tabs.encode(), filename="faq.tsv").pairs == pairs
    for encoding in ("utf-16", "utf-16-be"):
        content = tabs.encode(encoding)
        if encoding == "utf-16-be":
            content = b"\xfe\xff" + content
        parsed = parse_qa_bytes(content, filename="faq.txt")
        assert parsed.format == "csv" and parsed.pairs == pairs
    # Commas still win where the header names both columns with them.
    assert parse_qa_bytes(b'question,answer\n"a;b",c\n').pairs == [QAPair("a;b", "c")]
    broken = "question\tanswer\nq\ta\n".encode("utf-16") + b"\x00\xd8"  # a lone surrogate
    found = problems(broken, filename="faq.txt")
    assert found[0]["line"] == 3 and "broken UTF-16" in str(found[0]["message"])
    # Without its mark UTF-16 is not told from other bytes: refused, not misread.
    assert "UTF-8" in str(problems(tabs.encode("utf-16-le"), filename="faq.txt")[0]["message"])
    for content, line in (
        ("question\tanswer\nq\ta\n".encode("utf-16-le"), 1),
        (b"q,a\nq,a\x00\n", 2),
    ):
        found = problems(content, filename="faq.txt")
        assert found[0]["line"] == line and "NUL bytes" in str(found[0]["message"])


def _zipped(name: str, content: bytes) -> bytes:
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w") as archive:
        archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), content)
    return packed.getvalue()


PAIR_LINE = b'{"question": "q", "answer": "a"}'
NO_TEXT = [  # the same bytes in every test process (no time stamps): xdist compares them
    ("faq.jsonl.gz", gzip.compress(PAIR_LINE, mtime=0), "a compressed file"),
    ("faq.zst", b"\x28\xb5\x2f\xfd\x04\x00", "a compressed file"),
    ("train.parquet", b"PAR1\x15\x04\x15\x10", "a Parquet or Arrow table"),
    ("data-00000-of-00001.arrow", b"ARROW1\x00\x00\xff\xff", "a Parquet or Arrow table"),
    ("manual.pdf", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3", "a PDF: qatune trains on"),
    ("faq.zip", _zipped("faq.jsonl", PAIR_LINE), "a zip archive"),
]


@pytest.mark.parametrize(
    ("name", "content", "words"), NO_TEXT, ids=[name for name, _, _ in NO_TEXT]
)
def test_a_file_that_is_no_text_says_what_it_is_and_what_to_upload(
    name: str, content: bytes, words: str
) -> None:
    """Not "not UTF-8 (byte 0x8b at offset 1)": what the file is, and what to send instead."""
    found = problems(content, filename=name)
    assert len(found) == 1 and found[0]["line"] == 1
    assert words in str(found[0]["message"]), found
    assert "UTF-8 (byte" not in str(found[0]["message"])


def test_trls_records_are_pairs_as_the_hub_holds_them() -> None:
    """TRL's formats (and OpenAI's legacy prompt/completion), in text and conversational."""
    user = {"role": "user", "content": "Where is my order?"}
    lines = [
        {"prompt": " Where is my order? ", "completion": "It ships on Monday."},
        {"prompt": "Opening hours?", "chosen": "9 to 5.", "rejected": "Whenever."},
        {
            "prompt": [
                {"role": "system", "content": "Be brief."},
                user,
                {"role": "assistant", "content": "Which order?"},  # context, not learned
                {"role": "user", "content": "The blue one."},
            ],
            "completion": [{"role": "assistant", "content": "It ships on Monday."}],
        },
        {
            "prompt": [user],
            "chosen": [{"role": "assistant", "content": "Monday."}],
            "rejected": [{"role": "assistant", "content": "No idea."}],
        },
        {  # the implicit prompt: what both conversations share
            "chosen": [user, {"role": "assistant", "content": "Monday."}],
            "rejected": [user, {"role": "assistant", "content": "No idea."}],
            "score_chosen": 9.0,
        },
    ]
    content = "".join(json.dumps(line) + "\n" for line in lines).encode()
    earlier = (Turn("user", "Where is my order?"), Turn("assistant", "Which order?"))
    assert parse_qa_bytes(content, filename="trl.jsonl").pairs == [
        QAPair("Where is my order?", "It ships on Monday."),
        QAPair("Opening hours?", "9 to 5.", rejected="Whenever."),
        QAPair("The blue one.", "It ships on Monday.", "Be brief.", history=earlier),
        QAPair("Where is my order?", "Monday.", rejected="No idea."),
        QAPair("Where is my order?", "Monday.", rejected="No idea."),
    ]
    bad = [
        {"prompt": "Q?", "chosen": "A.", "rejected": "A."},
        {"prompt": "Q?", "chosen": "A."},
        {"completion": "A."},
        {"prompt": [user], "completion": "A."},
        {"prompt": [user], "completion": [user]},
        {
            "chosen": [user, {"role": "assistant", "content": "A."}],
            "rejected": [
                {"role": "user", "content": "Other?"},
                {"role": "assistant", "content": "B."},
            ],
        },
        {"chosen": "A.", "rejected": "B."},
    ]
    found = problems("".join(json.dumps(line) + "\n" for line in bad).encode())
    assert [(p["line"], p["field"]) for p in found] == [
        (1, "rejected"),
        (2, "rejected"),
        (3, "prompt"),
        (4, "completion"),
        (5, "completion"),
        (6, "rejected"),
        (7, "prompt"),
    ]
    assert found[0]["message"] == "rejected is the same as the preferred answer: nothing to learn"
    assert "assistant's messages only" in str(found[4]["message"])
    assert "the same conversation up to their last message" in str(found[5]["message"])


def test_a_sharegpt_record_is_a_conversation() -> None:
    """ShareGPT's turns, as Axolotl and LLaMA-Factory read them: each gpt turn learned."""
    record = {
        "id": "identity_0",
        "conversations": [
            {"from": "system", "value": "Be brief."},
            {"from": "human", "value": "Where is my order?"},
            {"from": "gpt", "value": "Which one?"},
            {"from": "human", "value": "The blue one."},
            {"from": "gpt", "value": "It ships on Monday."},
        ],
    }
    first = Turn("user", "Where is my order?")
    assert parse_qa_bytes((json.dumps(record) + "\n").encode()).pairs == [
        QAPair("Where is my order?", "Which one?", "Be brief."),
        QAPair(
            "The blue one.",
            "It ships on Monday.",
            "Be brief.",
            history=(first, Turn("assistant", "Which one?")),
        ),
    ]
    greeting = {
        "conversations": [
            {"from": "gpt", "value": "Hi! How can I help?"},  # before any question: context
            {"from": "human", "value": "Where is my order?"},
            {"from": "gpt", "value": "Monday."},
        ]
    }
    assert parse_qa_bytes((json.dumps(greeting) + "\n").encode()).pairs == [
        QAPair("Where is my order?", "Monday.", history=(Turn("assistant", "Hi! How can I help?"),))
    ]
    bad = [
        {"conversations": [{"from": "human", "value": "Q?"}, {"from": "bard", "value": "A."}]},
        {"conversations": "Q? A."},
        {"conversations": [{"from": ["human"], "value": "Q?"}]},  # not a name: no crash
    ]
    found = problems("".join(json.dumps(line) + "\n" for line in bad).encode())
    assert [(p["line"], p["field"]) for p in found] == [
        (1, "conversations[1].from"),
        (2, "conversations"),
        (3, "conversations[0].from"),
    ]
    assert "'bard'; use system, human, user, gpt, assistant" in str(found[0]["message"])


def test_a_spreadsheets_rewordings_are_pairs_of_their_own() -> None:
    """A column per rewording, or one column with a rewording a line (Alt+Enter in a cell)."""
    columns = (
        "Question,Answer,Rewording 1,Rewording 2\n"
        "Wi-Fi password?,harbor2024,What's the Wi-Fi code?,\n"
        "Opening hours?,9 to 5,,When do you open?\n"
    )
    one_column = (
        "question;answer;rewordings\nWi-Fi password?;harbor2024;\"What's the Wi-Fi code?\n"
        'How do I get online?"\nOpening hours?;9 to 5;\n'
    )
    assert parse_qa_bytes(columns.encode(), filename="faq.csv").pairs == [
        QAPair("Wi-Fi password?", "harbor2024"),
        QAPair("What's the Wi-Fi code?", "harbor2024"),
        QAPair("Opening hours?", "9 to 5"),
        QAPair("When do you open?", "9 to 5"),
    ]
    assert parse_qa_bytes(one_column.encode(), filename="faq.csv").pairs == [
        QAPair("Wi-Fi password?", "harbor2024"),
        QAPair("What's the Wi-Fi code?", "harbor2024"),
        QAPair("How do I get online?", "harbor2024"),
        QAPair("Opening hours?", "9 to 5"),
    ]
    many = 'question,answer,rewordings\nq,a,"' + "\n".join(f"r{i}" for i in range(21)) + '"\n'
    found = problems(many.encode(), filename="faq.csv")
    assert found[0]["field"] == "rewordings" and "the limit is 20" in str(found[0]["message"])


def test_a_field_in_capitals_is_read_as_a_header_is_and_a_misspelt_one_named() -> None:
    """A spreadsheet turned into JSON writes its headers ("Question", "Answer": pandas'
    to_json), and a table's header is read without case: so are a pair's fields. Two keys
    that are one field but for case, and a misspelt one, are named with the field meant."""
    capitals = {"Question": "q", "Answer": "a", "Rewordings": ["Q?"], "Category": "c"}
    assert validate_pairs([capitals]) == [QAPair("q", "a"), QAPair("Q?", "a")]
    lines = [
        {"Question": "q", "QUESTION": "q2", "Answer": "a"},
        {"questoin": "q", "answer": "a"},
        {"id": 1},
    ]
    found = problems("".join(json.dumps(line) + "\n" for line in lines).encode())
    messages = [str(p["message"]) for p in found]
    assert messages[0].startswith(
        "unknown record fields ['Answer', 'QUESTION', 'Question'] (did you mean answer, "
        "question?); "
    )
    assert messages[1] == 'missing field "question"'  # an answer makes it a QA pair
    assert messages[2].startswith("unknown record fields ['id']; each record needs")


def test_a_pair_may_carry_the_system_prompt_it_is_asked_under() -> None:
    """As a chat record's first turn does: in a record, or a table's "system" column."""
    record = {"question": "Open today?", "answer": "Until 5.", "system": "You are Harbor Cafe."}
    alpaca = {"instruction": "Translate: cat", "output": "chat", "system": "French only."}
    assert validate_pairs([record, alpaca]) == [
        QAPair("Open today?", "Until 5.", "You are Harbor Cafe."),
        QAPair("Translate: cat", "chat", "French only."),
    ]
    table = "question,answer,System\nOpen today?,Until 5.,You are Harbor Cafe.\nWi-Fi?,harbor,\n"
    assert parse_qa_bytes(table.encode(), filename="faq.csv").pairs == [
        QAPair("Open today?", "Until 5.", "You are Harbor Cafe."),
        QAPair("Wi-Fi?", "harbor"),
    ]
    found = problems(b'{"question": "q", "answer": "a", "system": 5}\n')
    assert found == [
        {"line": 1, "field": "system", "message": '"system" must be text, not a number'}
    ]


def test_empty_file_and_wrong_csv_header() -> None:
    assert "empty" in str(problems(b"  \n")[0]["message"])
    found = problems(b"frage,antwort\nx,y\n", filename="x.csv")
    assert found[0]["line"] == 1 and "question and answer" in str(found[0]["message"])


def test_a_csv_row_is_the_record_its_header_names_and_unread_columns_are_noted() -> None:
    """A preference pair's table, as a DPO set saved as CSV is; a column no field is read
    from is said in a note, the upload whole without it."""
    saved = b"id,prompt,chosen,rejected\n7,Opening hours?,9 to 5.,Whenever.\n"
    parsed = parse_qa_bytes(saved, filename="prefs.csv")
    assert [(p.question, p.answer, p.rejected) for p in parsed.pairs] == [
        ("Opening hours?", "9 to 5.", "Whenever.")
    ]
    assert [note.text() for note in parsed.notes] == [
        "the columns ['id'] were not read: a row is read from prompt, chosen, rejected"
    ]
    assert parse_qa_bytes(b"Q;A\nParking?;Yes.\n", filename="faq.csv").notes == []
    labelled = parse_qa_bytes(b"A,Question,Answer\nx,Parking?,Yes.\n", filename="faq.csv")
    assert labelled.pairs == [QAPair("Parking?", "Yes.")]  # "Answer" itself, not its initial
    assert [note.text() for note in labelled.notes] == [
        "the columns ['A'] were not read: a row is read from question, answer, system, rewording…"
    ]


def test_a_csv_header_below_a_title_is_found_and_lines_keep_their_numbers() -> None:
    """A sheet with a title saved as CSV: the header is the first of the first 10 lines
    that names question and answer (or Questions and Answers), in whichever delimiter does."""
    saved = "Greenfield FAQ;;\nUpdated weekly;;\n;;\nQuestions;Answers;Note\n"
    saved += "Open on Sunday?;Yes, 10-4;\n"
    parsed = parse_qa_bytes(saved.encode(), filename="faq.csv")
    assert parsed.pairs == [QAPair("Open on Sunday?", "Yes, 10-4")]
    found = problems((saved + "Parking?;;\n").encode(), filename="faq.csv")
    assert [(p["line"], p["message"]) for p in found] == [(6, '"answer" is empty')]


def test_csv_rows_with_the_wrong_number_of_columns() -> None:
    found = problems(b"question,answer\nq1,a1\nonly-one\nq3,a3,extra\n", filename="x.csv")
    assert [p["line"] for p in found] == [3, 4]
    assert found[0]["message"] == "1 columns, the header has 2"
    assert found[1]["message"] == (  # an answer with a comma in it, most often
        "3 columns, the header has 2: put a cell that holds ',' in double quotes (\"Yes, we do\")"
    )


def test_too_many_rows() -> None:
    rows = b"".join(b'{"question": "q", "answer": "a"}\n' for _ in range(6))
    assert "too many rows" in str(problems(rows, max_rows=5)[-1]["message"])


def test_a_json_array_wrapped_in_an_object_of_one_field_is_read() -> None:
    """As exports wrap their records: {"faq": [...]}, {"data": [...]} (with more fields)."""
    pair = {"question": "Open on Sunday?", "answer": "Yes, 10-4."}
    for document in ({"faq": [pair]}, {"data": [pair], "version": 2}):
        parsed = parse_qa_bytes(json.dumps(document, indent=2).encode(), filename="faq.json")
        assert parsed.pairs == [QAPair("Open on Sunday?", "Yes, 10-4.")], document
    found = problems(json.dumps({"faq": [pair], "v": 2}, indent=2).encode(), filename="f.json")
    assert "or an object whose one field holds it" in str(found[0]["message"])


PAIR = {"question": "Open on Sunday?", "answer": "Yes, 10-4."}
CHAT = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hey"}]}


@pytest.mark.parametrize(
    ("name", "text", "read_as", "pairs"),
    [
        ("faq.jsonl", json.dumps([PAIR, PAIR], indent=2), "json", 2),  # an array, pretty
        ("faq.json", json.dumps(PAIR) + "\n" + json.dumps(PAIR), "jsonl", 2),  # JSON lines
        ("faq.json", json.dumps(PAIR, indent=2), "json", 1),  # one record, over lines
        ("faq.jsonl", json.dumps({"faq": [PAIR]}), "json", 1),  # a wrapper, minified
        ("chat.jsonl", json.dumps(CHAT), "jsonl", 1),  # one chat: a record of one list
        ("chat.json", json.dumps(CHAT, indent=2), "json", 1),
    ],
    ids=["array-as-jsonl", "lines-as-json", "one-record", "wrapper", "one-chat", "chat-pretty"],
)
def test_json_or_json_lines_is_decided_by_what_the_file_holds(
    name: str, text: str, read_as: str, pairs: int
) -> None:
    """Not by its name: a pretty-printed array saved as .jsonl was 10 problems of 'invalid
    JSON', JSON lines saved as .json one."""
    parsed = parse_qa_bytes(text.encode(), filename=name)
    assert (parsed.format, len(parsed.pairs)) == (read_as, pairs)


def test_json_array_items_are_numbered() -> None:
    found = problems(b'[{"question": "q", "answer": "a"}, {"question": "q"}]', filename="x.json")
    assert found == [{"item": 2, "field": "answer", "message": 'missing field "answer"'}]


def test_each_assistant_message_of_a_conversation_is_learned_after_all_before_it() -> None:
    record = {
        "messages": [
            {"role": "developer", "content": "You are Acme's support bot."},
            {"role": "user", "content": "Hi", "name": "ana"},
            {"role": "assistant", "content": "Hello! How can I help?", "weight": 0},
            {"role": "user", "content": [{"type": "text", "text": "Where is my order?"}]},
            {"role": "assistant", "content": "Send me its number.", "weight": 1},
            {"role": "user", "content": "A-17"},
            {"role": "assistant", "content": "A-17 ships on Monday."},
            {"role": "user", "content": "Thanks"},  # no answer after it: nothing to learn
        ]
    }
    pairs = parse_qa_bytes(json.dumps(record).encode(), filename="chat.jsonl").pairs
    assert [(p.question, p.answer) for p in pairs] == [
        ("Where is my order?", "Send me its number."),
        ("A-17", "A-17 ships on Monday."),
    ]
    assert {p.system for p in pairs} == {"You are Acme's support bot."}
    assert [(t.role, t.content) for t in pairs[1].history] == [
        ("user", "Hi"),
        ("assistant", "Hello! How can I help?"),
        ("user", "Where is my order?"),
        ("assistant", "Send me its number."),
    ]
    assert pairs[1].prompt_messages()[-1] == {"role": "user", "content": "A-17"}
    assert read_jsonl(write_jsonl(pairs).decode()) == pairs  # stored and read back whole


WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def test_a_function_calling_conversation_teaches_each_call_and_the_answer_after_it() -> None:
    """OpenAI's function-calling records: tools offered, an assistant's calls, the tools'
    results; each learned assistant message after everything before it, calls included."""
    record = {
        "tools": [{"type": "function", "function": WEATHER}],
        "parallel_tool_calls": False,
        "messages": [
            {"role": "system", "content": "You are a travel helper."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "sunny"}'},
            {"role": "assistant", "content": "Sunny in Paris."},
        ],
    }
    pairs = parse_qa_bytes(json.dumps(record).encode(), filename="tools.jsonl").pairs
    call = ToolCall("get_weather", '{"city": "Paris"}', "call_1")
    tools = json.dumps([{"type": "function", "function": WEATHER}])
    assert pairs == [
        QAPair("Weather in Paris?", "", "You are a travel helper.", tools=tools,
               answer_tool_calls=(call,)),
        QAPair("Weather in Paris?", "Sunny in Paris.", "You are a travel helper.", tools=tools,
               tool_turns=(Turn("assistant", "", (call,)),
                           Turn("tool", '{"sky": "sunny"}', tool_call_id="call_1"))),
    ]  # fmt: skip
    assert all(p.uses_tools for p in pairs)
    assert pairs[1].messages()[-3:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "call_1",
                    "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                }
            ],
        },
        {"role": "tool", "content": '{"sky": "sunny"}', "tool_call_id": "call_1"},
        {"role": "assistant", "content": "Sunny in Paris."},
    ]
    assert pairs[0].tool_definitions() == [{"type": "function", "function": WEATHER}]
    assert read_jsonl(write_jsonl(pairs).decode()) == pairs  # stored and read back whole

    # The older shape: `functions`, an assistant's `function_call`, a `function` message
    legacy = {
        "functions": [WEATHER],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "function_call": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                "weight": 0,
            },
            {"role": "function", "name": "get_weather", "content": '{"sky": "sunny"}'},
            {"role": "assistant", "content": "Sunny in Paris."},
        ],
    }
    (pair,) = parse_qa_bytes(json.dumps(legacy).encode(), filename="functions.jsonl").pairs
    assert pair.tools == tools
    assert pair.tool_turns == (
        Turn("assistant", "", (ToolCall("get_weather", '{"city": "Paris"}'),)),
        Turn("tool", '{"sky": "sunny"}'),
    )


@pytest.mark.parametrize(
    ("record", "field", "words"),
    [
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b", "weight": 0},
                ]
            },
            "messages",
            "no assistant message to learn",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b", "weight": 0.5},
                ]
            },
            "messages[1].weight",
            "a weight is 0 or 1",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a", "weight": 1},
                    {"role": "assistant", "content": "b"},
                ]
            },
            "messages[0].weight",
            "on assistant messages",
        ),  # fmt: skip
        ({"messages": [{"role": "narrator", "content": "a"}]}, "messages[0].role", "'narrator'"),
        (
            {
                "messages": [
                    {"role": "user", "content": "a", "tool_calls": []},
                    {"role": "user", "content": "b", "function_call": {"name": "f"}},
                    {"role": "assistant", "content": "c"},
                ]
            },
            "messages[1].tool_calls",
            "only an assistant message calls tools",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]},
                ]
            },
            "messages[1].tool_calls[0]",
            "its arguments JSON text",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "function_call": {"name": "f", "arguments": {}}},
                ]
            },
            "messages[1].function_call",
            "its arguments JSON text",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b"},
                ],
                "tools": [{"type": "function"}],
            },
            "tools[0]",
            "must be a function with a name",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b"},
                ],
                "tools": [],
                "functions": [{"name": "f"}],
            },
            "tools",
            "not both",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}},
                    {"role": "tool", "content": "r", "tool_call_id": 5},
                    {"role": "assistant", "content": "b"},
                ]
            },
            "messages[2].tool_call_id",
            "must be text, on a tool message",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}},
                    {"role": "function", "content": "r"},
                    {"role": "assistant", "content": "b"},
                ]
            },
            "messages[2].name",
            "names its function",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "b", "weight": 0},
                    {"role": "assistant", "content": "c"},
                ]
            },
            "messages[2]",
            "or a tool's result (messages[1] is assistant)",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {}}]},
                    {"role": "assistant", "content": "b"},
                ]
            },
            "messages[0].content",
            "image_url",
        ),  # fmt: skip
        (
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "content": "  "},
                ]
            },
            "messages[1].content",
            "is empty",
        ),  # fmt: skip
        (
            {"messages": [{"role": "assistant", "content": "b"}]},
            "messages[0]",
            "must follow a user message",
        ),  # fmt: skip
        ({"messages": []}, "messages", "non-empty list"),
    ],
)
def test_a_conversation_qatune_cannot_learn_is_a_problem_at_its_line(
    record: dict[str, object], field: str, words: str
) -> None:
    good = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    lines = [json.dumps(good), json.dumps(record)]
    (found,) = problems("\n".join(lines).encode())
    assert (found["line"], found["field"]) == (2, field)
    assert words in str(found["message"]), found


def test_openai_chat_records_with_a_system_turn_keep_it() -> None:
    record = {
        "messages": [
            {"role": "system", "content": "You are the museum's guide."},
            {"role": "user", "content": "When do you open?"},
            {"role": "assistant", "content": "At nine."},
        ]
    }
    parsed = parse_qa_bytes(json.dumps(record).encode() + b"\n", filename="train.jsonl")
    assert parsed.pairs == [QAPair("When do you open?", "At nine.", "You are the museum's guide.")]
    assert read_jsonl(write_jsonl(parsed.pairs).decode()) == parsed.pairs
    empty_system = {"messages": [{"role": "system", "content": " "}, *record["messages"][1:]]}
    assert "empty" in str(problems(json.dumps(empty_system).encode())[0]["message"])


def test_inline_pairs_use_the_same_rules() -> None:
    assert validate_pairs([{"question": "q", "answer": "a"}]) == [QAPair("q", "a")]
    with pytest.raises(ValidationFailed) as caught:
        validate_pairs([{"question": "q", "answer": "a"}, {"question": ""}])
    assert {d["field"] for d in caught.value.details} == {"question", "answer"}


@pytest.mark.parametrize(
    ("content", "filename", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "qa.json", "nested too deeply"),
        (b'{"question": "q", "answer": "a"}\n' + b"[" * 100_000 + b"\n", "qa.jsonl", "nested"),
        (b'{"question": ' + b"1" * 5000 + b', "answer": "a"}\n', "qa.jsonl", "too large"),
        (b'{"question": 1e999, "answer": "a"}\n', "qa.jsonl", "must be text"),
        (b"{}\n" * 1000, "qa.jsonl", "unknown record fields"),
    ],
)
def test_hostile_json_is_a_problem_with_its_line_not_a_crash(
    content: bytes, filename: str, why: str
) -> None:
    with pytest.raises(ValidationFailed) as rejected:
        parse_qa_bytes(content, filename=filename)
    assert why in str(rejected.value.details[0]["message"])
    assert "line" in rejected.value.details[0] or "item" in rejected.value.details[0]


def test_an_openai_preference_record_is_a_pair_with_its_non_preferred_answer() -> None:
    record = {
        "input": {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello."},
                {"role": "user", "content": "Opening hours?"},
            ],
            "tools": [],
        },
        "preferred_output": [{"role": "assistant", "content": "9 to 5, Monday to Friday."}],
        "non_preferred_output": [{"role": "assistant", "content": "We are open sometimes."}],
    }
    (pair,) = parse_qa_bytes(json.dumps(record).encode(), filename="prefs.jsonl").pairs
    assert (pair.question, pair.answer, pair.rejected) == (
        "Opening hours?",
        "9 to 5, Monday to Friday.",
        "We are open sometimes.",
    )
    assert pair.system == "Be brief." and len(pair.history) == 2
    assert read_jsonl(write_jsonl([pair]).decode()) == [pair]
    assert pair.rejected_pair().messages()[-1]["content"] == "We are open sometimes."
    ends_with_assistant = {**record, "input": {"messages": record["input"]["messages"][:3]}}  # type: ignore[index]
    (found,) = problems(json.dumps(ends_with_assistant).encode())
    assert found["field"] == "input.messages" and "end with the user" in str(found["message"])
    no_output = {**record, "non_preferred_output": []}
    (found,) = problems(json.dumps(no_output).encode())
    assert found["field"] == "non_preferred_output"


def test_a_100k_pair_file_validates_in_memory_a_few_times_its_size() -> None:
    """The row limit is a setting (QATUNE_MAX_DATASET_ROWS); at 100k pairs, a file just
    under the 20 MB upload limit, validation holds the pairs and little else."""
    content = "".join(
        json.dumps(
            {
                "question": f"How do I reset the password of account number {i}?",
                "answer": f"Open Settings, choose Account {i}, then Reset password.",
            }
        )
        + "\n"
        for i in range(100_000)
    ).encode()
    tracemalloc.start()
    try:
        parsed = parse_qa_bytes(content, filename="qa.jsonl", max_rows=100_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(parsed.pairs) == 100_000
    assert peak < 6 * len(content), (peak, len(content))  # measured: 4.7x
    too_many = problems(content, max_rows=99_999)
    assert too_many[0]["message"] == (
        "too many rows: 100000, the limit is 99999; split the file or raise QATUNE_MAX_DATASET_ROWS"
    )


def test_a_pairs_rewordings_are_pairs_of_their_own_with_its_answer() -> None:
    record = {
        "question": "Where is the Wi-Fi password?",
        "answer": "On the fridge door.",
        "rewordings": ["What's the wifi code?", " Where is the Wi-Fi password? ", "wifi pw?"],
    }
    parsed = parse_qa_bytes(json.dumps(record).encode(), filename="faq.jsonl").pairs
    assert parsed == [  # the question itself once, each rewording after it, in order
        QAPair("Where is the Wi-Fi password?", "On the fridge door."),
        QAPair("What's the wifi code?", "On the fridge door."),
        QAPair("wifi pw?", "On the fridge door."),
    ]
    assert validate_pairs([record]) == parsed  # inline pairs of POST /jobs: the same
    lines = [
        {"question": "Q", "answer": "A", "rewordings": "What is Q?"},
        {"question": "Q", "answer": "A", "rewordings": ["fine", "", 3]},
        {"question": "Q", "answer": "A", "rewordings": ["again?"] * 21},
    ]
    found = problems(b"".join(json.dumps(line).encode() + b"\n" for line in lines))
    assert [(p["line"], p["field"]) for p in found] == [(1, "rewordings")] + [
        (2, "rewordings")
    ] * 2 + [(3, "rewordings")]
    assert "must be a list of questions, not text" in str(found[0]["message"])
    assert "is empty" in str(found[1]["message"]) and "must be text" in str(found[2]["message"])
    assert "holds 21 questions; the limit is 20" in str(found[3]["message"])
