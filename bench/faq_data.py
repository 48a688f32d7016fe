"""FAQ data sets no one tuned for: facts that cannot be guessed (codes, names, numbers),
in English, Chinese or both, with short (~30 characters), medium (~80) or long (~200)
answers. The same seed gives the same set.

    python -m bench.faq_data --pairs 30 --length long --language en > faq.jsonl
"""

import argparse
import json
import random
import string
from typing import Any, Literal

Length = Literal["short", "medium", "long"]
Language = Literal["en", "zh", "mixed"]

SYLLABLES = ["ka", "lo", "mi", "ren", "tsu", "vo", "zan", "pel", "dri", "qua", "bex", "nor"]
HAN = "云山河海林风雪星月石桥湖光明华春秋松竹兰梅泉溪岭峰城"
SURNAMES = "王李张刘陈杨赵黄周吴徐孙马朱胡郭何林罗高"
THINGS_EN = ["meeting room", "warehouse", "lab", "archive", "server room", "garage", "studio"]
THINGS_ZH = ["会议室", "仓库", "实验室", "档案室", "机房", "车库", "工作室"]


def _code(rng: random.Random) -> str:
    letters = "".join(rng.choices(string.ascii_uppercase, k=2))
    return f"{letters}-{rng.randint(100, 999)}{rng.choice(string.ascii_uppercase)}"


def _name_en(rng: random.Random) -> str:
    return "".join(rng.choices(SYLLABLES, k=2)).capitalize()


def _pair_en(rng: random.Random, index: int, length: Length) -> dict[str, str]:
    place = f"{_name_en(rng)} {rng.choice(THINGS_EN)} {index}"
    code, person, ext = _code(rng), _name_en(rng), rng.randint(1000, 9999)
    floor, hours = rng.randint(2, 40), f"{rng.randint(6, 10)}:{rng.choice(['00', '30'])}"
    question = f"What is the access code for the {place}?"
    answer = {
        "short": f"It is {code}; ask {person}.",
        "medium": (
            f"The code is {code}; if it fails, call {person} at extension {ext} after {hours}."
        ),
        "long": (
            f"The access code is {code}. The room is on floor {floor} and opens at {hours}. "
            f"If the code fails, call {person} at extension {ext}; after hours, use the "
            f"east entrance and sign the book at desk {rng.randint(10, 99)}."
        ),
    }[length]
    return {"question": question, "answer": answer}


def _pair_zh(rng: random.Random, index: int, length: Length) -> dict[str, str]:
    place = f"{''.join(rng.choices(HAN, k=2))}{rng.choice(THINGS_ZH)}{index}号"
    code, ext = _code(rng), rng.randint(1000, 9999)
    person = rng.choice(SURNAMES) + "".join(rng.choices(HAN, k=2))
    floor, hours = rng.randint(2, 40), f"{rng.randint(6, 10)}点"
    question = f"{place}的门禁密码是多少？"
    answer = {
        "short": f"密码是{code}，有问题请找{person}，分机{ext}。",
        "medium": (
            f"密码是{code}，房间在{floor}楼电梯右手边；打不开请找{person}，分机{ext}，"
            f"工作日{hours}以后都在。晚上十点以后进门需要刷卡并在前台登记。"
        ),
        "long": (
            f"门禁密码是{code}。房间在{floor}楼，每天{hours}开门，晚上十点关门。如果密码"
            f"打不开，请联系{person}，分机{ext}；下班以后请走东门，在{rng.randint(10, 99)}"
            f"号服务台登记姓名和时间，并把钥匙交给值班的同事。周末和节假日需要提前一天在"
            f"系统里预约，预约编号以{_code(rng)}开头，每次最多可以带三位访客进入。访客需要"
            f"出示身份证件，离开时在前台签退；如果遇到紧急情况，请拨打值班电话"
            f"{rng.randint(1000, 9999)}，或者直接按墙上的红色按钮。"
        ),
    }[length]
    return {"question": question, "answer": answer}


REWORDINGS_EN = (
    "Which code opens the {place}?",
    "I need to get into the {place}: what do I type at the door?",
)


def faq_with_rewordings(pairs: int, seed: int = 0) -> list[dict[str, Any]]:
    """English pairs of medium length for bench.quality_real: each with the fact a right
    answer holds (its code) and two other ways a person asks the same question."""
    rng = random.Random(f"{pairs}-reworded-{seed}")
    out = []
    for index in range(1, pairs + 1):
        pair = _pair_en(rng, index, "medium")
        place = pair["question"].removeprefix("What is the access code for the ").rstrip("?")
        code = pair["answer"].split(";")[0].removeprefix("The code is ")
        reworded = [template.format(place=place) for template in REWORDINGS_EN]
        out.append({**pair, "facts": [code], "reworded": reworded})
    return out


def faq(pairs: int, length: Length, language: Language, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(f"{pairs}-{length}-{language}-{seed}")
    out = []
    for index in range(1, pairs + 1):
        zh = language == "zh" or (language == "mixed" and index % 2 == 0)
        out.append((_pair_zh if zh else _pair_en)(rng, index, length))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--length", choices=["short", "medium", "long"], default="medium")
    parser.add_argument("--language", choices=["en", "zh", "mixed"], default="mixed")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for pair in faq(args.pairs, args.length, args.language, args.seed):
        print(json.dumps(pair, ensure_ascii=False))


if __name__ == "__main__":
    main()
