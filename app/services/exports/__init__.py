"""A job's model in other forms (merged, GGUF)."""
