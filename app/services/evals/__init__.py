"""Evals, their runs, their files, and the graders that score them."""
