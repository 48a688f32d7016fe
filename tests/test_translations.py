"""The UI's words in both languages: every key the pages use exists, in English and in
简体中文 alike (the browser test, tests/ui/test_languages.py, looks at the pages)."""

import json
import re

from tests.conftest import ROOT

WEB = ROOT / "app" / "web"


def strings() -> dict[str, set[str]]:
    return {
        lang: set(json.loads((WEB / "i18n" / f"{lang}.json").read_text())) for lang in ("en", "zh")
    }


def test_both_languages_have_every_key() -> None:
    found = strings()
    assert len(found["en"]) > 200  # (the file was read)
    assert found["en"] - found["zh"] == set(), "untranslated into Chinese"
    assert found["zh"] - found["en"] == set(), "Chinese without English"


def test_every_key_the_pages_use_is_there() -> None:
    known = strings()["en"]
    used = set()
    for path in [*(WEB / "js").rglob("*.js"), WEB / "index.html"]:
        text = path.read_text()
        used |= set(re.findall(r'\bt\("([\w.]+)"', text))
        used |= set(re.findall(r'data-i18n="([\w.]+)"', text))
        used |= set(re.findall(r'stat\("([\w.]+)"', text))
    assert used - known == set()
