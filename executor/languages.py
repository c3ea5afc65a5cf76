"""The languages the executor runs: source file names, compile and run command lines, toolchain versions."""

from __future__ import annotations

import logging
import os
import re
import struct
import subprocess
import threading
from dataclasses import dataclass

from services.kernel.contracts import Language
from services.lib.sandbox import JAIL_HARNESS, JAIL_PROGRAM_DIR, JAIL_SOURCE_DIR

log = logging.getLogger(__name__)


PYTHON = "/usr/bin/python3"
GCC = "/usr/bin/gcc"
GXX = "/usr/bin/g++"
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"
JAVA = f"{JAVA_HOME}/bin/java"
JAVAC = f"{JAVA_HOME}/bin/javac"
# Debian's JDK keeps jvm.cfg and its security settings behind symlinks into /etc; the JVM will not start
# without them.
JAVA_ETC = "/etc/java-17-openjdk"

# The JVM starts about 15 threads of its own (GC, JIT, finalizer, ...); the pids cgroup counts threads, so
# a Java program gets this many on top of its `processes` limit.
JVM_THREAD_ALLOWANCE = 32
JAVAC_HEAP_MB = 512

# Runs inside the compile jail. compile() is the whole of Python's compile step: a SyntaxError (or a NUL
# byte: ValueError) is a compilation error; anything else about the program is a run-time matter.
_PYTHON_SYNTAX_CHECK = """\
import sys
path = sys.argv[1]
with open(path, "rb") as f:
    source = f.read()
try:
    compile(source, path.rsplit("/", 1)[-1], "exec", dont_inherit=True)
except (SyntaxError, ValueError) as e:
    import traceback
    sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
    sys.exit(1)
"""


@dataclass(frozen=True)
class LanguageSpec:
    """How one language is compiled and run. Paths in argv are jail paths."""

    id: Language
    # Compiled languages read the source from /src and write the program to /prog; for Python the source
    # file is the program and the compile step only checks it.
    compiled: bool
    extra_readonly_mounts: tuple[str, ...] = ()
    extra_processes: int = 0

    def source_name(self, source: str) -> str:
        """The file name the source is saved under (Java: the public top-level class decides)."""
        if self.id == Language.PYTHON:
            return "main.py"
        if self.id == Language.C:
            return "main.c"
        if self.id == Language.CPP:
            return "main.cpp"
        return f"{java_public_class(source) or 'Main'}.java"

    def compile_argv(self, source_name: str) -> list[str]:
        if self.id == Language.PYTHON:
            # -S: compile() needs nothing from `site`, whose .pth processing is half of the check's CPU time.
            return [PYTHON, "-I", "-S", "-B", "-c", _PYTHON_SYNTAX_CHECK, f"{JAIL_PROGRAM_DIR}/{source_name}"]
        if self.id in (Language.C, Language.CPP):
            out = f"{JAIL_PROGRAM_DIR}/main"
            src = f"{JAIL_SOURCE_DIR}/{source_name}"
            common = ["-O2", "-pipe", "-fdiagnostics-color=never", "-o", out, src]
            if self.id == Language.C:
                return [GCC, "-std=c17", *common, "-lm"]
            return [GXX, "-std=c++17", *common]
        return [
            JAVAC,
            f"-J-Xmx{JAVAC_HEAP_MB}m",
            "-J-XX:+UseSerialGC",
            "-J-XX:TieredStopAtLevel=1",
            "-J-XX:-UsePerfData",
            "-proc:none",
            "-encoding",
            "UTF-8",
            "-d",
            JAIL_PROGRAM_DIR,
            f"{JAIL_SOURCE_DIR}/{source_name}",
        ]

    def run_argv(self, *, main: str, memory_mb: int, function_mode: bool = False) -> list[str]:
        """argv for one run. `main` is the program file (Python) or the main class (Java)."""
        if self.id == Language.PYTHON:
            program = f"{JAIL_PROGRAM_DIR}/{main}"
            if function_mode:
                # -S: the harness sets up what `site` would (harness._site_setup) without processing .pth files,
                # 6 ms of every run.
                return [PYTHON, "-I", "-S", "-B", JAIL_HARNESS, program]
            return [PYTHON, "-I", "-B", program]
        if self.id in (Language.C, Language.CPP):
            return [f"{JAIL_PROGRAM_DIR}/main"]
        return [
            JAVA,
            f"-Xmx{java_heap_mb(memory_mb)}m",
            "-Xss64m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-XX:-UsePerfData",
            "-cp",
            JAIL_PROGRAM_DIR,
            main,
        ]


LANGUAGES: dict[Language, LanguageSpec] = {
    Language.PYTHON: LanguageSpec(Language.PYTHON, compiled=False),
    Language.C: LanguageSpec(Language.C, compiled=True),
    Language.CPP: LanguageSpec(Language.CPP, compiled=True),
    Language.JAVA: LanguageSpec(
        Language.JAVA,
        compiled=True,
        extra_readonly_mounts=(JAVA_ETC,),
        extra_processes=JVM_THREAD_ALLOWANCE,
    ),
}


def get_language(language_id: str) -> LanguageSpec:
    try:
        return LANGUAGES[Language(language_id)]
    except ValueError:
        raise ValueError(f"unknown language {language_id!r}; expected one of {', '.join(Language)}") from None


def java_heap_mb(memory_mb: int) -> int:
    """-Xmx for a memory limit: the cgroup limit minus room for the JVM's own memory (metaspace, code cache,
    thread stacks), so a full heap ends in OutOfMemoryError (MLE with a reason) rather than an OOM kill."""
    return max(16, memory_mb - max(64, memory_mb // 8))


# --- Java: which class is public (the file name) and which has main (the class to run) -------------------

_MAX_CLASS_NAME = 200
_JAVA_NOISE = re.compile(
    r'//[^\n]*|/\*.*?\*/|""".*?"""|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
    re.DOTALL,
)
_JAVA_PUBLIC_TYPE = re.compile(
    r"\bpublic\s+(?:(?:abstract|final|static|strictfp|sealed|non-sealed)\s+)*"
    r"(?:class|interface|enum|record|@\s*interface)\s+([A-Za-z_$][\w$]*)"
)


def java_public_class(source: str) -> str | None:
    """Name of the public top-level type, which javac requires to live in <Name>.java.

    Comments and literals are blanked first, and nested types (brace depth > 0) are skipped.
    """
    code = _JAVA_NOISE.sub(lambda m: " " * len(m.group(0)), source)
    depth = 0
    position = 0
    for match in _JAVA_PUBLIC_TYPE.finditer(code):
        segment = code[position : match.start()]
        depth += segment.count("{") - segment.count("}")
        position = match.start()
        if depth == 0:
            # An absurd name would not fit in a file name; javac then reports the mismatch as a CE.
            return match.group(1) if len(match.group(1)) <= _MAX_CLASS_NAME else None
    return None


_ACC_PUBLIC = 0x0001
_ACC_STATIC = 0x0008
_MAIN_DESCRIPTOR = "([Ljava/lang/String;)V"


def modified_utf8(raw: bytes) -> str:
    """A class file's string (JVMS 4.4.7, "modified UTF-8"): NUL is C0 80, and a character outside the Basic
    Multilingual Plane is its UTF-16 surrogate pair, each half encoded on its own; the pairs are joined here."""
    text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def java_main_class(class_file: bytes) -> str | None:
    """The binary name (a.b.C) of the class if it declares `public static void main(String[])`, else None.

    Parses the class file format (JVMS ch. 4) just far enough to read the method table. The bytes come from
    a jailed compiler, so any malformed input is simply "no main" (never an exception to the caller).
    """
    try:
        return _parse_main_class(class_file)
    except (struct.error, IndexError, KeyError, UnicodeDecodeError, ValueError):
        return None


def _parse_main_class(data: bytes) -> str | None:
    if data[:4] != b"\xca\xfe\xba\xbe":
        return None
    offset = 8
    (count,) = struct.unpack_from(">H", data, offset)
    offset += 2
    utf8: dict[int, str] = {}
    classes: dict[int, int] = {}
    index = 1
    while index < count:
        tag = data[offset]
        offset += 1
        if tag == 1:
            (length,) = struct.unpack_from(">H", data, offset)
            utf8[index] = modified_utf8(data[offset + 2 : offset + 2 + length])
            offset += 2 + length
        elif tag == 7:
            (classes[index],) = struct.unpack_from(">H", data, offset)
            offset += 2
        elif tag in (8, 16, 19, 20):
            offset += 2
        elif tag == 15:
            offset += 3
        elif tag in (3, 4, 9, 10, 11, 12, 17, 18):
            offset += 4
        elif tag in (5, 6):
            offset += 8
            index += 1  # longs and doubles take two constant-pool slots
        else:
            return None
        index += 1
    _access, this_class, _super, interfaces = struct.unpack_from(">HHHH", data, offset)
    offset += 8 + 2 * interfaces
    for table in ("fields", "methods"):
        (members,) = struct.unpack_from(">H", data, offset)
        offset += 2
        for _ in range(members):
            flags, name, descriptor, attributes = struct.unpack_from(">HHHH", data, offset)
            offset += 8
            for _ in range(attributes):
                (length,) = struct.unpack_from(">I", data, offset + 2)
                offset += 6 + length
            if (
                table == "methods"
                and utf8.get(name) == "main"
                and utf8.get(descriptor) == _MAIN_DESCRIPTOR
                and flags & (_ACC_PUBLIC | _ACC_STATIC) == _ACC_PUBLIC | _ACC_STATIC
            ):
                return utf8[classes[this_class]].replace("/", ".")
    return None


# --- Toolchain versions ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Toolchain:
    """What compiles and runs a language here, read from the installed tools."""

    version: str
    compiler: str
    runtime: str

    @property
    def key(self) -> str:
        """Identifies the toolchain in build-cache keys: a compiler or runtime upgrade invalidates builds."""
        return f"{self.compiler} | {self.runtime}"


_toolchains: dict[str, Toolchain | None] = {}
_toolchain_lock = threading.Lock()


def toolchain(language_id: str) -> Toolchain | None:
    """The installed toolchain for a language (None if it is missing or broken). Probed once per process;
    this runs the tools on the host, which is fine: they only print their versions."""
    with _toolchain_lock:
        if language_id not in _toolchains:
            try:
                _toolchains[language_id] = _probe(language_id)
            except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
                log.error("toolchain for %s is unavailable: %s", language_id, exc)
                _toolchains[language_id] = None
        return _toolchains[language_id]


def _output(*argv: str) -> str:
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
    )
    return (done.stdout + done.stderr).strip()


def _probe(language_id: str) -> Toolchain:
    libc = os.confstr("CS_GNU_LIBC_VERSION") or "libc"
    if language_id == Language.PYTHON:
        version, build = _output(
            PYTHON, "-c", "import platform, sys; print(platform.python_version()); print(sys.version)"
        ).splitlines()[:2]
        return Toolchain(version, f"CPython {version} (syntax check)", f"CPython {build}")
    if language_id in (Language.C, Language.CPP):
        driver = GCC if language_id == Language.C else GXX
        version = _output(driver, "-dumpfullversion")
        compiler = _output(driver, "--version").splitlines()[0]
        runtime = libc if language_id == Language.C else f"{libc}, libstdc++ {version}"
        return Toolchain(version, compiler, runtime)
    if language_id == Language.JAVA:
        compiler = _output(JAVAC, "-version").splitlines()[0]
        runtime_lines = _output(JAVA, "-version").splitlines()
        match = re.search(r'version "([^"]+)"', runtime_lines[0])
        if match is None:
            raise ValueError(f"unexpected `java -version` output: {runtime_lines[0]!r}")
        return Toolchain(match.group(1), compiler, "; ".join(line.strip() for line in runtime_lines[:2]))
    raise ValueError(f"unknown language {language_id!r}")
