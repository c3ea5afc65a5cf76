"""Sandboxed compile-and-run of submitted programs (nsjail): languages, checkers, build cache, verdicts."""
