"""What names look like, for every layer that checks one."""

import re

# A model on a hub: organisation/name, as Hugging Face spells it.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")

# The model qatune makes itself (app/ml/builtin.py): the default base, and the demo's.
BUILTIN_TINY = "builtin:tiny"

# A pretrained model installed from the package registry (app/ml/packaged.py): the default.
SMOLLM2 = "smollm2-135m-instruct"

# A model of Ollama's store on this machine (app/ml/ollama_store.py): ollama:NAME[:TAG]
OLLAMA_NAME = re.compile(
    r"^ollama:([a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*(:[A-Za-z0-9._-]+)?$"
)


def number_in_digits(text: str, *, max_digits: int = 18) -> int | None:
    """The number `text` spells in 0-9 alone (at most 18 digits by default: within the
    database's integers), or None. `str.isdigit` passes "²", which `int` refuses, and
    "١٢", which `int` reads as 12: a name or header is a number only as written here."""
    if not (0 < len(text) <= max_digits and text.isascii() and text.isdigit()):
        return None
    return int(text)
