"""The base's answers to the general prompts, kept for its next jobs: read back as they
were written, asked again when the file is damaged or the base is another."""

from pathlib import Path

from app.ml.general_prompts import PROBES
from app.ml.pairs import QAPair
from app.ml.training.keeping import (
    Knowledge,
    KnownAnswer,
    knowledge_file,
    read_knowledge,
    write_knowledge,
)


def base(tmp_path: Path, name: str, weights: bytes) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    (directory / "config.json").write_text("{}")
    (directory / "model.safetensors").write_bytes(weights)
    return directory


def test_what_a_base_knew_reads_back_as_it_was_written(tmp_path: Path) -> None:
    knew = Knowledge(
        [
            KnownAnswer(PROBES[0], "London is the capital of England."),
            KnownAnswer(PROBES[2], "北京"),
        ],
        len(PROBES),
        [QAPair("Say hello.", "Hello! How can I help?")],
    )
    path = knowledge_file(tmp_path / "answers", base(tmp_path, "m", b"w"), device="cpu",
                          answering_as="bf16")  # fmt: skip
    assert read_knowledge(path) is None  # the first job asks
    write_knowledge(path, knew)
    assert read_knowledge(path) == knew


def test_another_base_device_or_precision_is_asked_again(tmp_path: Path) -> None:
    answers = tmp_path / "answers"
    one, other = base(tmp_path, "one", b"w1"), base(tmp_path, "other", b"w22")
    paths = {
        knowledge_file(answers, one, device="cpu", answering_as="bf16"),
        knowledge_file(answers, other, device="cpu", answering_as="bf16"),
        knowledge_file(answers, one, device="cuda", answering_as="bf16"),
        knowledge_file(answers, one, device="cpu", answering_as="bf16-4bit"),
    }
    assert len(paths) == 4


def test_a_damaged_file_is_asked_again_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "knowledge.json"
    for damaged in ("{", "[]", '{"known": [["not a probe", "x"]], "asked": 30, "replay": []}'):
        path.write_text(damaged)
        assert read_knowledge(path) is None


def test_a_base_asked_without_its_replay_says_so(tmp_path: Path) -> None:
    """A job that replays nothing (the default) does not ask the 60 replay prompts; a later
    job that replays reads None and asks them."""
    path = tmp_path / "knowledge.json"
    write_knowledge(path, Knowledge([KnownAnswer(PROBES[1], "Moscow")], len(PROBES), None))
    read = read_knowledge(path)
    assert read is not None and read.replay is None and read.known[0].answer == "Moscow"
