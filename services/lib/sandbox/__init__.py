"""The sandbox library: nsjail, configured for untrusted code (namespaces, cgroups, seccomp, rlimits, bounded
pipes), and the classification of how a run ended. Every service that reads or runs untrusted code does so through
this package: the executor (programs, the function-mode harness), the judge (linters) and the perturbation service
(the seed parser). docs/sandbox.md is the threat model.

What callers use is exported here; the modules, one mechanism each, are:
    layout      paths, ids and fds a jail sees; the host's staging directory for jail-visible files
    profile     JailProfile: limits, mounts and the seccomp policies, as an nsjail config
    cgroups     a run's cgroups (memory peak, OOM kills, CPU time, waiting for a CPU); the host's cgroup setup
    clocks      a run's CPU time and waiting (Meter), and which clock stops it
    capture     stdin from memory, capped stdout, stderr's head and tail
    supervise   spawning nsjail, watching a running jail, RunControl
    results     RunResult, and the program's ending from nsjail's log
    verdicts    classify: a RunResult's verdict
    jail        the Sandbox: cold runs, and warm ones through
    warm_runs   runs in reusable jails (the host's side), with
    warm        the pool of reusable jails
    protocol    the host's half of the zygote's protocol
    slots       a reusable jail's program folders, and the zygote's file installed for jails
    zygote      the first process of a reusable jail (copied into the jail: standard library only, one file)
"""

from services.lib.sandbox.cgroups import ensure_cgroup_parents
from services.lib.sandbox.jail import Sandbox
from services.lib.sandbox.layout import (
    INSIDE_ID,
    JAIL_ENV,
    JAIL_HARNESS,
    JAIL_PROGRAM_DIR,
    JAIL_SOURCE_DIR,
    STAGING_ROOT,
    default_nsjail_path,
    is_reachable,
    sandbox_visible_root,
)
from services.lib.sandbox.profile import JailProfile
from services.lib.sandbox.results import RunResult
from services.lib.sandbox.slots import ZYGOTE_SOURCE, install_readable, write_program
from services.lib.sandbox.supervise import RunControl
from services.lib.sandbox.verdicts import classify, printable, signal_name, unjudged_reason

__all__ = [
    # the jail
    "Sandbox",
    "JailProfile",
    "RunControl",
    "RunResult",
    # verdicts
    "classify",
    "unjudged_reason",
    "printable",
    "signal_name",
    # the host's setup
    "default_nsjail_path",
    "ensure_cgroup_parents",
    "sandbox_visible_root",
    "is_reachable",
    "STAGING_ROOT",
    # reusable jails: the zygote, installed where jails can read it, and a run's program files
    "ZYGOTE_SOURCE",
    "install_readable",
    "write_program",
    # what a jail sees
    "INSIDE_ID",
    "JAIL_ENV",
    "JAIL_HARNESS",
    "JAIL_PROGRAM_DIR",
    "JAIL_SOURCE_DIR",
]
