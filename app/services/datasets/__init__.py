"""Datasets and the records in them: upload, parsing, the problems found."""
