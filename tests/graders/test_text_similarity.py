"""text_similarity held to the reference implementations people score with (rapidfuzz,
sacrebleu, rouge-score, nltk's GLEU) on English, where their tokenizers agree with ours;
Chinese and METEOR by hand."""

import pytest
import sacrebleu
from nltk.translate.gleu_score import sentence_gleu
from rapidfuzz import fuzz
from rouge_score import rouge_scorer

from app.graders.text_similarity import lcs_length, similarity, tokens

PAIRS = [
    ("The capital of France is Paris.", "Paris is the capital of France."),
    ("Reset your password from the login page", "You can reset the password on the login page"),
    ("The order ships within 3 business days", "Orders ship in three business days"),
    ("Open the settings menu and choose Accounts", "Open the settings menu and choose Accounts"),
    ("yes", "no"),
]
ROUGE = {f"rouge_{n}": f"rouge{n}" for n in range(1, 6)} | {"rouge_l": "rougeL"}


@pytest.mark.parametrize("answer,reference", PAIRS)
def test_scores_match_the_reference_implementations(answer: str, reference: str) -> None:
    assert similarity("fuzzy_match", answer, reference) == pytest.approx(
        fuzz.ratio(answer, reference) / 100
    )
    assert similarity("bleu", answer, reference) == pytest.approx(
        sacrebleu.sentence_bleu(answer, [reference]).score / 100, abs=1e-9
    )
    scorer = rouge_scorer.RougeScorer(list(ROUGE.values()))
    scores = scorer.score(reference, answer)
    for ours, theirs in ROUGE.items():
        assert similarity(ours, answer, reference) == pytest.approx(scores[theirs].fmeasure)  # type: ignore[arg-type]
    assert similarity("gleu", answer, reference) == pytest.approx(
        sentence_gleu([tokens(reference)], tokens(answer))
    )


def test_chinese_is_read_character_by_character() -> None:
    assert tokens("重置密码：登录页。") == ["重", "置", "密", "码", "：", "登", "录", "页", "。"]
    assert similarity("rouge_1", "在登录页重置密码", "重置密码在登录页") == 1.0
    assert 0 < similarity("rouge_l", "在登录页重置密码", "重置密码在登录页") < 1
    assert similarity("rouge_1", "在登录页重置密码", "请联系客服") == 0.0


def test_meteor_rewards_order_and_ignores_case() -> None:
    same = similarity("meteor", "Paris is the capital", "paris is the capital")
    shuffled = similarity("meteor", "capital the is Paris", "Paris is the capital")
    # 4 of 4 words matched: F-mean 1; one chunk: penalty 0.5·(1/4)^3; four chunks: 0.5·1^3
    assert same == pytest.approx(1 - 0.5 * (1 / 4) ** 3)
    assert shuffled == pytest.approx(1 - 0.5)
    assert similarity("meteor", "nothing alike", "Paris is the capital") == 0.0


def test_lcs_is_the_longest_common_subsequence() -> None:
    assert lcs_length("ABCBDAB", "BDCABA") == 4
    assert lcs_length("", "abc") == 0
    long_a, long_b = "ab" * 20_000, "ba" * 20_000  # 40k characters each: bit-parallel, fast
    assert lcs_length(long_a, long_b) == 39_999
