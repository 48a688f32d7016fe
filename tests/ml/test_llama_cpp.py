"""llama.cpp's scripts run one after another in one converter process: each announced as
it starts, the first failure named with its last words, and nothing run after it. (The
real converter, on a trained model: tests/e2e/test_exports.py.)"""

import sys
from pathlib import Path

import pytest

from app.ml.export.llama_cpp import Conversion, ConversionFailed, run_conversions

# What the child imports from a converter before the scripts run (the pre-tokenizer hook).
CONVERSION_BASE = """
class TextModel:
    def get_vocab_base_pre(self, tokenizer):
        raise NotImplementedError
"""


@pytest.fixture
def converter(tmp_path: Path) -> Path:
    """A converter whose scripts write a file named by their argument, or fail."""
    folder = tmp_path / "converter"
    (folder / "conversion").mkdir(parents=True)
    (folder / "conversion" / "__init__.py").write_text("")
    (folder / "conversion" / "base.py").write_text(CONVERSION_BASE)
    (folder / "write.py").write_text(
        "import sys\nfrom pathlib import Path\n"
        "Path(sys.argv[1]).write_text(sys.argv[0])\n"
        "sys.exit(0)  # as llama.cpp's scripts end\n"
    )
    (folder / "refuse.py").write_text(
        "import sys\nprint('loading', file=sys.stderr)\n"
        "print('ValueError: no such architecture', file=sys.stderr)\nsys.exit(1)\n"
    )
    return folder


def test_each_script_runs_in_turn_in_one_process(converter: Path, tmp_path: Path) -> None:
    outs = [tmp_path / "a", tmp_path / "b"]
    started: list[int] = []
    run_conversions(
        converter,
        [Conversion("write.py", (str(out),)) for out in outs],
        timeout=60,
        on_start=started.append,
    )
    assert started == [0, 1]
    assert [out.read_text() for out in outs] == [str(converter / "write.py")] * 2
    assert "conversion" not in sys.modules  # the scripts ran in the child, not here


def test_the_first_failure_is_named_and_nothing_runs_after_it(
    converter: Path, tmp_path: Path
) -> None:
    before, after = tmp_path / "before", tmp_path / "after"
    with pytest.raises(ConversionFailed) as failed:
        run_conversions(
            converter,
            [
                Conversion("write.py", (str(before),)),
                Conversion("refuse.py", ()),
                Conversion("write.py", (str(after),)),
            ],
            timeout=60,
        )
    assert failed.value.script == "refuse.py"
    assert str(failed.value) == "ValueError: no such architecture"
    assert before.exists() and not after.exists()


def test_a_converter_past_its_time_is_stopped(converter: Path) -> None:
    (converter / "stuck.py").write_text("import time\ntime.sleep(60)\n")
    with pytest.raises(ConversionFailed) as failed:
        run_conversions(converter, [Conversion("stuck.py", ())], timeout=1)
    assert (failed.value.script, str(failed.value)) == ("stuck.py", "stopped after 1 s")
