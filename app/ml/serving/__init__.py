"""Serving tuned models: one batching engine per base model, adapters per row."""
