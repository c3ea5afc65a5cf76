"""Where a request goes and how it is sent: `Endpoint`, defined once in the kernel (services/kernel/judges.py) so
that the judges file and every other caller configure an endpoint the same way. A judge's `LLMJudge` is one."""

from __future__ import annotations

from services.kernel.judges import Endpoint, ResponseFormat

__all__ = ["Endpoint", "ResponseFormat"]
