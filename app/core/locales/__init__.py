"""Catalogues of the service's sentences, one module per language (see app/core/language.py)."""
