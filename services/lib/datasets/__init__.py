"""Datasets in: one loader per format, each a function from one native record to Tribunal request bodies.

A loader `load(record, line) -> Bodies` takes one record (a JSON object, as a dict) and its line number and
returns the bodies it becomes: problems (`POST /v1/problems`), attempts (items of `POST /v1/attempts:batch`) and,
for LoCaL, similarity pairs; a bad record raises `RecordError(field, message)` naming the field. Pure: no network,
no database; `tribunal import` (services/launcher/importer.py) streams a file through a loader and posts the
bodies. Formats (docs/datasets.md): `tribunal`, `humaneval`, `human-eval-samples`, `mbpp`, `apps`, `local`,
`axiom`, `attempts`.

This `__init__` is the library's public surface.
"""

from collections.abc import Callable
from typing import Any

from services.lib.datasets import apps, attempts, axiom, human_eval_samples, humaneval, local, mbpp, tribunal
from services.lib.datasets.human_eval_samples import humaneval_prompts
from services.lib.datasets.humaneval import HUMANEVAL_LIMITS, docstring_examples, humaneval_problem, humaneval_test_code
from services.lib.datasets.records import Bodies, RecordError

Loader = Callable[[dict[str, Any], int], Bodies]

FORMATS: dict[str, Loader] = {
    "tribunal": tribunal.load,
    "humaneval": humaneval.load,
    "human-eval-samples": human_eval_samples.load,
    "mbpp": mbpp.load,
    "apps": apps.load,
    "local": local.load,
    "axiom": axiom.load,
    "attempts": attempts.load,
}


def load(format: str, record: object, line: int) -> Bodies:
    """The bodies one record of `format` becomes.

    Raises:
        RecordError: the record is not an object, or a field of it is bad (`field` names it).
        KeyError: `format` is not one of FORMATS.
    """
    if not isinstance(record, dict):
        raise RecordError("record", f"expected a JSON object, got {type(record).__name__}")
    return FORMATS[format](record, line)


__all__ = [
    "FORMATS",
    "HUMANEVAL_LIMITS",
    "Bodies",
    "Loader",
    "RecordError",
    "docstring_examples",
    "humaneval_problem",
    "humaneval_prompts",
    "humaneval_test_code",
    "load",
]
