"""The text of generated tokens, as every answer is shown and compared (the engine, the
answer table's `generate`, reinforcement samples, judges). No torch here: the API process
imports it before its torch environment is set."""

import codecs
import weakref
from typing import Any

# Per tokenizer: each token's bytes, or None where the tokenizer's own decode is used
_TOKEN_BYTES: "weakref.WeakKeyDictionary[Any, list[bytes] | None]" = weakref.WeakKeyDictionary()


def answer_text(tokenizer: Any, ids: list[int], *, final: bool = True) -> str:
    """The text of generated tokens, as every answer is shown and compared.

    A byte-level tokenizer's (Qwen's, Llama 3's, the built-in one's) tokens are bytes:
    bytes that are not UTF-8 text (an untrained model writes many) are shown as such,
    `\\xe4`, not as replacement characters; unless `final`, a character whose bytes have
    not all come yet is held back. Valid text is exactly the tokenizer's decode. Other
    tokenizers decode as they do (skipping special tokens)."""
    table = _token_bytes(tokenizer)
    if table is None:
        return str(tokenizer.decode(ids, skip_special_tokens=True))
    data = b"".join(table[i] if 0 <= i < len(table) else b"" for i in ids)
    return codecs.getincrementaldecoder("utf-8")("backslashreplace").decode(data, final=final)


def _token_bytes(tokenizer: Any) -> list[bytes] | None:
    try:
        return _TOKEN_BYTES[tokenizer]
    except (KeyError, TypeError):
        pass
    table = _byte_level_table(tokenizer)
    try:
        _TOKEN_BYTES[tokenizer] = table
    except TypeError:  # (not weakly referable: built again next time)
        pass
    return table


def _byte_level_table(tokenizer: Any) -> list[bytes] | None:
    from tokenizers import decoders
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if not isinstance(getattr(backend, "decoder", None), decoders.ByteLevel):
        return None
    if getattr(tokenizer, "clean_up_tokenization_spaces", False):
        return None  # its decode rewrites spaces: leave that to it
    byte_of = {char: byte for byte, char in bytes_to_unicode().items()}
    added = tokenizer.added_tokens_decoder
    skipped = set(tokenizer.all_special_ids) | {i for i, t in added.items() if t.special}
    vocab = tokenizer.get_vocab()
    table = [b""] * (max(vocab.values(), default=-1) + 1)
    for token, index in vocab.items():
        if index in skipped:
            continue
        if index in added:
            table[index] = added[index].content.encode()
            continue
        try:
            table[index] = bytes(byte_of[char] for char in token)
        except KeyError:  # not byte-level after all
            return None
    return table
