"""Evaluation: eval sets, scoring at and beyond the training length, diagnostics, slice strings."""
