"""What names look like, for every layer that checks one."""

import re

# A model on a hub: organisation/name, as Hugging Face spells it.
HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")

# The model qatune makes itself (app/ml/builtin.py): the default base, and the demo's.
BUILTIN_TINY = "builtin:tiny"
