"""Builds: a program compiled once per (tenant, language, toolchain, source), in the sandbox.

- executor/builds/compiling.py: one compile, jailed, with its limits, its size watchdog and the checks on what the
  compiler wrote;
- executor/builds/cache.py: the cache it is published in (atomically), leased while it runs, evicted by budget.
"""

from executor.builds.cache import Build, BuildCache, BuildLease, BuildLimits, tenant_digest
from executor.builds.compiling import (
    COMPILE_OUTPUT_STORED,
    COMPILE_WALL_S,
    MIB,
    BuildStatus,
    UnsafeBuildError,
    secure_output,
)

__all__ = [
    "COMPILE_OUTPUT_STORED",
    "COMPILE_WALL_S",
    "MIB",
    "Build",
    "BuildCache",
    "BuildLease",
    "BuildLimits",
    "BuildStatus",
    "UnsafeBuildError",
    "secure_output",
    "tenant_digest",
]
