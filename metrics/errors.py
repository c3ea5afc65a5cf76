"""The two ways a metric can refuse: malformed input (the caller's fault) or input it cannot be computed on."""

from __future__ import annotations


class MetricInputError(ValueError):
    """Malformed input: wrong shape, mismatched lengths, labels not 0/1 where binary labels are needed.

    The message always names the offending argument (``y_true``, ``params.bins``, ...), so that an HTTP layer can
    turn it into a 4xx that points at the field.
    """


class UndefinedMetricError(Exception):
    """Well-formed input on which the metric has no value (one class only, constant scores, empty subset, ...).

    The registry reports the message as the reason under ``errors``; it never becomes a number.
    """
