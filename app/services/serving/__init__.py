"""Asking a trained or base model: which model a name is, and the answer."""
