"""A run's clocks: its CPU time (every process of it, from its cgroup) and how long it waited for a CPU that another
process held (a Meter), and which clock stops it (clock_stop): the CPU limit, the wall limit on the run's own time,
or the machine's load holding it past starved_after_s (docs/sandbox.md, "Clocks under load")."""

from __future__ import annotations

import contextlib
import os
from typing import Literal, Protocol

from services.lib.sandbox.cgroups import RunCgroups

# Which clock stopped a run (see clock_stop).
Stop = Literal["cpu", "wall", "starved"]
# How the clocks judge a run (docs/sandbox.md, "Clocks under load"). The wall limit bounds the run's own time: the
# time elapsed minus the time it waited for a CPU that another process held. A run whose elapsed time reaches
# starved_after_s(wall limit) first (STARVED_WALL_FACTOR wall limits, at most STARVED_EXTRA_MAX_S more than one) was
# starved by the machine's load: its stop says nothing about the program. A run that gets a tenth of a CPU still
# reaches its CPU limit first when that is no larger than its wall limit.
STARVED_WALL_FACTOR = 10
STARVED_EXTRA_MAX_S = 300.0
# A wall stop whose CPU time is below this fraction of the CPU limit, after a run that waited for a CPU for at least
# this fraction of its elapsed time, is not trusted either (the waiting measured is a lower bound): re-run.
UNTRUSTED_CPU_FRACTION = 0.5
UNTRUSTED_WAIT_FRACTION = 0.5
# How often a running jail's cgroup is read at most, and at least: the CPU limit is checked as often as the CPU
# left could run out on every CPU of the machine, so a stop overshoots the limit by at most ~10 ms per CPU.
_SAMPLE_MAX_S = 0.25
_SAMPLE_MIN_S = 0.01
_HOST_CPUS = os.cpu_count() or 1


class Limits(Protocol):
    """The limits the clocks enforce (a JailProfile's)."""

    @property
    def cpu_time_s(self) -> float: ...

    @property
    def wall_time_s(self) -> float: ...


def _own_cpu_ns(pid: int) -> int:
    """CPU time a (single-threaded) process has used itself, in ns: the first field of /proc/PID/schedstat."""
    with open(f"/proc/{pid}/schedstat", "rb") as handle:
        return int(handle.read().split()[0])


def _run_delay_ns(tid: int) -> int:
    """How long a thread has waited on a run queue for a CPU, in ns: the second field of /proc/TID/schedstat."""
    with open(f"/proc/{tid}/schedstat", "rb") as handle:
        return int(handle.read().split()[1])


class Meter:
    """A run's CPU time (every process of it: its cgroup's) and how long it waited for a CPU, since it was made.

    The waiting is the larger of two lower bounds of the time at least one of the run's threads was ready to run
    and had no CPU: the cgroup's CPU pressure ("some"; the kernel weighs each CPU's share by how busy the group was
    there, which undercounts a thread that moves between CPUs) and the longest wait of any one thread (run_delay in
    /proc/TID/schedstat, sampled: a thread that ended between two samples counts up to its last one). A lower bound
    only ever stretches the wall clock less than the load did, never more. `exclude` is a process of the cgroup
    that is not the run's (a reusable jail's zygote): its CPU time and waiting are left out."""

    def __init__(self, cgroups: RunCgroups, exclude: int | None = None) -> None:
        self._cgroups = cgroups
        self._exclude = exclude
        self._cpu0 = cgroups.cpu_us()
        pressure = cgroups.pressure_us()
        self._pressure0 = pressure
        self._excluded0 = self._excluded = _own_cpu_ns(exclude) if exclude else 0
        self._delays0: dict[int, int] = {}
        for tid in cgroups.threads():
            with contextlib.suppress(OSError, ValueError, IndexError):
                self._delays0[tid] = _run_delay_ns(tid)
        self._longest_delay_ns = 0
        self.cpu_s = 0.0
        self.wait_s = 0.0

    def sample(self) -> None:
        """Read the cgroup now (a read that fails keeps the last figures)."""
        try:
            cpu_us = self._cgroups.cpu_us()
        except (OSError, ValueError):
            return
        if self._exclude:
            with contextlib.suppress(OSError, ValueError):
                self._excluded = _own_cpu_ns(self._exclude)
        self.cpu_s = max(0.0, (cpu_us - self._cpu0) / 1e6 - (self._excluded - self._excluded0) / 1e9)
        for tid in self._cgroups.threads():
            if tid == self._exclude:
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                delay = _run_delay_ns(tid) - self._delays0.get(tid, 0)
                self._longest_delay_ns = max(self._longest_delay_ns, delay)
        pressure = self._cgroups.pressure_us()
        pressure_s = 0.0
        if pressure is not None and self._pressure0 is not None:
            pressure_s = (pressure - self._pressure0) / 1e6
        self.wait_s = max(self.wait_s, pressure_s, self._longest_delay_ns / 1e9)


def next_sample_s(cpu_left_s: float) -> float:
    """When to read a running jail's cgroup again: before the CPU left could run out on every CPU at once."""
    return min(_SAMPLE_MAX_S, max(_SAMPLE_MIN_S, cpu_left_s / _HOST_CPUS))


def starved_after_s(wall_time_s: float) -> float:
    """The elapsed time after which a run whose own time has not reached its wall limit was starved by the load."""
    return min(STARVED_WALL_FACTOR * wall_time_s, wall_time_s + STARVED_EXTRA_MAX_S)


def clock_stop(elapsed_s: float, meter: Meter | None, profile: Limits) -> Stop | None:
    """Which clock stops the run now, if one does: "cpu" (its processes' CPU time reached the CPU limit), "wall"
    (its own time, the elapsed time less the time it waited for a CPU, reached the wall limit) or "starved" (the
    elapsed time reached starved_after_s(wall limit) first: the machine's load, not the program, held it)."""
    if meter is not None and meter.cpu_s >= profile.cpu_time_s:
        return "cpu"
    if elapsed_s - (meter.wait_s if meter is not None else 0.0) >= profile.wall_time_s:
        return "wall"
    if elapsed_s >= starved_after_s(profile.wall_time_s):
        return "starved"
    return None
