"""Values every schema shares."""

MAX_JSON_INT = 2**53 - 1  # the largest integer a JSON number keeps exactly
