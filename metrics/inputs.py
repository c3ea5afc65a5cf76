"""The validation of a metrics request (api.md conventions; the registry's docstring lists them): the per-item
arrays, the params each metric reads with their defaults, and the checked reading of a scalar param. `Inputs` holds
one request's validated arrays and settings, shared by every metric of the request and cut down per resample."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from metrics import calibration, decisions, discrimination, perturbation
from metrics.arrays import (
    FloatArray,
    IntArray,
    as_binary_vector,
    as_float_vector,
    as_label_vector,
    as_probabilities,
    as_ratings_matrix,
    label_codes,
)
from metrics.errors import MetricInputError

PER_ITEM_PARAMS = ("seed_score", "arm", "severity", "turn")
SCALAR_PARAMS: dict[str, Any] = {
    "threshold": decisions.DEFAULT_THRESHOLD,
    "bins": calibration.DEFAULT_BINS,
    "folds": decisions.DEFAULT_FOLDS,
    "grid": None,
    "level": "interval",
    "weights": "none",
    "scale": None,
    "eps": discrimination.LOG_LOSS_EPS,
    "median_cut": False,
    "icc_form": "2,1",
    "target": "y_score",
    "primary_threshold": perturbation.PRIMARY_THRESHOLD,
    "reaction_drop": perturbation.REACTION_DROP,
    "max_turn": None,
    "ci_level": 0.95,
    "min_clusters": 2,
    "protocol": "pseudocode",
    "step": None,
    "k": 1,
}


def number_param(params: Mapping[str, Any], key: str, low: float | None = None, high: float | None = None) -> float:
    """`params[key]` as a finite number (not a bool), within [low, high] when given; MetricInputError if not."""
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | float | np.number) or not np.isfinite(value):
        raise MetricInputError(f"params.{key} must be a number, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise MetricInputError(f"params.{key} must lie in [{low}, {high}], got {value!r}")
    return float(value)


def integer_param(params: Mapping[str, Any], key: str, low: int) -> int:
    """`params[key]` as an integer (not a bool) of at least `low`; MetricInputError if not."""
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise MetricInputError(f"params.{key} must be an integer >= {low}, got {value!r}")
    return int(value)


def choice_param(params: Mapping[str, Any], key: str, options: Sequence[str]) -> str:
    """`params[key]`, which must be one of `options`; MetricInputError if not."""
    value = params[key]
    if value not in options:
        raise MetricInputError(f"params.{key} must be one of {', '.join(options)}, got {value!r}")
    return str(value)


@dataclass
class Inputs:
    """Validated request arrays and settings, shared by every metric of one request."""

    n_items: int
    y_true: FloatArray | None
    y_score: FloatArray | None
    groups: NDArray[Any] | None
    ratings: FloatArray | None
    items: dict[str, NDArray[Any]]
    settings: dict[str, Any]
    surface_sim: FloatArray | None = None
    metric_scores: dict[str, FloatArray] | None = None
    fold_ids: IntArray | None = None
    _cache: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        y_true: ArrayLike | None,
        y_score: ArrayLike | None,
        groups: ArrayLike | None,
        ratings: ArrayLike | None,
        params: Mapping[str, Any] | None,
        surface_sim: ArrayLike | None = None,
        metric_scores: Mapping[str, ArrayLike] | None = None,
    ) -> Inputs:
        raw = dict(params or {})
        unknown = sorted(set(raw) - set(SCALAR_PARAMS) - set(PER_ITEM_PARAMS))
        if unknown:
            raise MetricInputError(f"params.{unknown[0]} is not a known parameter")
        arrays: dict[str, NDArray[Any]] = {}
        truth = None if y_true is None else as_float_vector(y_true, "y_true")
        score = None if y_score is None else as_float_vector(y_score, "y_score")
        group_labels = None if groups is None else as_label_vector(groups, "groups")
        matrix = None if ratings is None else as_ratings_matrix(ratings)
        for key in PER_ITEM_PARAMS:
            if raw.get(key) is not None:
                if key == "arm":
                    arrays[key] = as_label_vector(raw[key], "params.arm")
                else:
                    arrays[key] = as_float_vector(raw[key], f"params.{key}", allow_missing=key == "severity")
        lengths = {
            name: len(array)
            for name, array in (("y_true", truth), ("y_score", score), ("groups", group_labels))
            if array is not None
        }
        lengths.update({f"params.{key}": len(array) for key, array in arrays.items()})
        if matrix is not None:
            lengths["ratings (columns)"] = matrix.shape[1]
        if len(set(lengths.values())) > 1:
            described = ", ".join(f"{name}: {length}" for name, length in lengths.items())
            raise MetricInputError(f"per-item inputs differ in length ({described}); they must match")
        n_items = next(iter(lengths.values()), None)
        surface = None if surface_sim is None else as_float_vector(surface_sim, "surface_sim")
        if surface is not None:
            if n_items is not None and surface.size != n_items:
                raise MetricInputError(
                    f"surface_sim has {surface.size} entries but the other per-item inputs have {n_items}"
                )
            n_items = surface.size
        per_metric = None
        if metric_scores is not None:
            if not isinstance(metric_scores, Mapping):
                raise MetricInputError("metric_scores must map metric names to per-item scores")
            per_metric = {}
            for name, values in metric_scores.items():
                where = f"metric_scores.{name}"
                per_metric[str(name)] = vector = as_float_vector(values, where)
                if n_items is not None and vector.size != n_items:
                    raise MetricInputError(
                        f"{where} has {vector.size} entries but the other per-item inputs have {n_items}"
                    )
                n_items = vector.size
        settings = {key: raw.get(key, default) for key, default in SCALAR_PARAMS.items()}
        settings = {key: (SCALAR_PARAMS[key] if value is None else value) for key, value in settings.items()}
        return cls(
            n_items=0 if n_items is None else n_items,
            y_true=truth,
            y_score=score,
            groups=group_labels,
            ratings=matrix,
            items=arrays,
            settings=settings,
            surface_sim=surface,
            metric_scores=per_metric,
        )

    def need(self, what: str, metric: str) -> NDArray[Any]:
        value = self.items.get(what) if what in PER_ITEM_PARAMS else getattr(self, what)
        if value is None:
            where = f"params.{what}" if what in PER_ITEM_PARAMS else what
            raise MetricInputError(f"{where} is required for {metric}")
        return np.asarray(value)

    def binary_truth(self, metric: str) -> IntArray:
        if "binary" not in self._cache:
            self._cache["binary"] = as_binary_vector(self.need("y_true", metric), "y_true")
        return np.asarray(self._cache["binary"])

    def probabilities(self, metric: str) -> FloatArray:
        if "probabilities" not in self._cache:
            self._cache["probabilities"] = as_probabilities(self.need("y_score", metric), "y_score")
        return np.asarray(self._cache["probabilities"])

    def rater_matrix(self, metric: str) -> FloatArray:
        if self.ratings is not None:
            return self.ratings
        if self.y_true is None or self.y_score is None:
            raise MetricInputError(f"ratings (or both y_true and y_score) is required for {metric}")
        return np.vstack([self.y_true, self.y_score])

    def folds(self, metric: str) -> IntArray:
        if self.fold_ids is None:
            groups = self.need("groups", metric)
            self.fold_ids = decisions.group_folds(groups, integer_param(self.settings, "folds", 2))
        return self.fold_ids

    def take(self, items: IntArray, copy: IntArray) -> Inputs:
        """The inputs of one bootstrap resample; a group drawn twice becomes two groups."""
        settings = dict(self.settings)
        if settings["max_turn"] is None and "turn" in self.items and self.items["turn"].size:
            # Report the same turns on every resample as on the full sample, even when a resample lacks the
            # longest trajectory.
            settings["max_turn"] = int(self.items["turn"].max())
        groups = None
        if self.groups is not None:
            _, codes = label_codes(self.groups)
            groups = copy * (int(codes.max()) + 1) + codes[items]
        return replace(
            self,
            n_items=int(items.size),
            y_true=None if self.y_true is None else self.y_true[items],
            y_score=None if self.y_score is None else self.y_score[items],
            groups=groups,
            ratings=None if self.ratings is None else self.ratings[:, items],
            items={key: array[items] for key, array in self.items.items()},
            settings=settings,
            surface_sim=None if self.surface_sim is None else self.surface_sim[items],
            metric_scores=None
            if self.metric_scores is None
            else {name: values[items] for name, values in self.metric_scores.items()},
            fold_ids=None if self.fold_ids is None else self.fold_ids[items],
            _cache={},
        )
