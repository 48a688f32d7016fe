"""Record a model's answers to your own prompts as a fine-tuning file, before the model stops.

OpenAI's fine-tuned gpt-4o, 4o-mini, 4.1 and 4.1-mini models stop serving on 2027-01-14.
What such a model says to your prompts can be kept, an open model trained on it here, and
the two compared (docs/leaving-openai.md):

    pip install openai
    OPENAI_API_KEY=sk-... python scripts/record_answers.py \\
        --model ft:gpt-4o-mini-2024-07-18:acme:faq:AbC123 prompts.jsonl recorded.jsonl

`prompts.jsonl` holds one conversation a line, `{"messages": [...]}`; a fine-tuning file
works too (a conversation ending with an assistant turn is asked without it). Each line
written is `{"messages": [..., {"role": "assistant", "content": <the answer>}]}`, OpenAI's
chat fine-tuning format, which qatune takes as it is. The model is asked greedily
(temperature 0), one prompt at a time, and a line is written as soon as it is answered, so
an interrupted run is continued by running it again (the prompts recorded are skipped).
`--base-url` asks another OpenAI-compatible server instead (the tests ask qatune's).
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def prompts_of(path: Path) -> list[list[dict[str, Any]]]:
    conversations = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        messages = record.get("messages") if isinstance(record, dict) else None
        if not isinstance(messages, list) or not messages:
            sys.exit(f'{path}:{number}: a line must be {{"messages": [...]}}')
        if messages[-1].get("role") == "assistant":
            messages = messages[:-1]  # a fine-tuning record: ask its question again
        conversations.append(messages)
    return conversations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompts", type=Path)
    parser.add_argument("recorded", type=Path)
    parser.add_argument("--model", required=True, help="the model to record, e.g. ft:gpt-4o-…")
    parser.add_argument("--base-url", default=None, help="default: OpenAI's API")
    parser.add_argument("--api-key", default=None, help="default: $OPENAI_API_KEY")
    parser.add_argument("--max-tokens", type=int, default=1024)
    args = parser.parse_args()
    from openai import OpenAI

    client = OpenAI(base_url=args.base_url, api_key=args.api_key)
    conversations = prompts_of(args.prompts)
    done = set()
    if args.recorded.exists():
        for line in args.recorded.read_text(encoding="utf-8").splitlines():
            if line.strip():
                done.add(json.dumps(json.loads(line)["messages"][:-1], sort_keys=True))
    with args.recorded.open("a", encoding="utf-8") as out:
        for number, messages in enumerate(conversations, 1):
            if json.dumps(messages, sort_keys=True) in done:
                continue
            reply = client.chat.completions.create(
                model=args.model,
                messages=messages,  # type: ignore[arg-type]  # the API's shape, as read
                temperature=0,
                max_tokens=args.max_tokens,
            )
            answer = reply.choices[0].message.content or ""
            record = {"messages": [*messages, {"role": "assistant", "content": answer}]}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            out.flush()
            print(f"{number}/{len(conversations)} recorded", file=sys.stderr)


if __name__ == "__main__":
    main()
