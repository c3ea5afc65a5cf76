"""Exfiltration through a live stack: a tenant's programs try to read the platform's secrets through every path
where untrusted code or its output meets the platform (compilers, the syntax check, test runs in both modes, and
every judge that reads source: lint's pylint and cppcheck, the reference metrics, sample_tests and an LLM judge).

The secrets: the admin key (`<data dir>/admin.key`, 0600), a world-readable file planted in the data dir, and a
world-readable file planted in the host's /tmp. None of them may appear in any API response, and the data dir
and database must be private. Every output flood must end as OLE.
"""

from __future__ import annotations

import json
import secrets
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from services.launcher.stack import EmbeddedStack
from tests.fake_llm import ScriptedLLM
from tests.helpers import wait_attempt

OFFLINE = ("sample_tests", "chrf", "codebleu", "edit_similarity", "lint")


@pytest.fixture(scope="module")
def hostile_stack(
    tmp_path_factory: pytest.TempPathFactory, redis_url: str, scripted_llm: ScriptedLLM
) -> Iterator[EmbeddedStack]:
    judges = tmp_path_factory.mktemp("judges-all") / "judges.toml"
    judges.write_text(
        "".join(f'[[judge]]\nname = "{m}"\nkind = "offline"\nmethod = "{m}"\n\n' for m in OFFLINE)
        + f'[[judge]]\nname = "scripted"\nkind = "llm"\nrubric = "cocreation"\nbase_url = "{scripted_llm.base_url}"\n'
        'model = "scripted-model"\nmax_tries = 1\ntimeout_s = 5\n'
    )
    stack = EmbeddedStack(
        tmp_path_factory.mktemp("stack-hostile"), redis_url=f"{redis_url.rsplit('/', 1)[0]}/5", judges_file=judges
    )
    stack.start()
    yield stack
    stack.stop()


@pytest.fixture(scope="module")
def planted(hostile_stack: EmbeddedStack) -> Iterator[dict[str, str]]:
    """Secrets and the host paths they live at."""
    in_data = hostile_stack.data_dir / "planted-secret.txt"
    in_tmp = Path("/tmp") / f"tribunal-planted-{uuid.uuid4().hex}.txt"
    values = {"data": f"planted{secrets.token_hex(12)}", "tmp": f"planted{secrets.token_hex(12)}"}
    in_data.write_text(values["data"])
    in_tmp.write_text(values["tmp"])
    for path in (in_data, in_tmp):
        path.chmod(0o644)
    admin_key = hostile_stack.admin_key_path.read_text().strip()
    yield {
        "admin_key": admin_key,
        "admin_key_path": str(hostile_stack.admin_key_path),
        "data_secret": values["data"],
        "data_path": str(in_data),
        "tmp_secret": values["tmp"],
        "tmp_path": str(in_tmp),
    }
    in_tmp.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def attacker(hostile_stack: EmbeddedStack, planted: dict[str, str]) -> Iterator[httpx.Client]:
    admin_headers = {"Authorization": f"Bearer {planted['admin_key']}"}
    with httpx.Client(base_url=hostile_stack.url, headers=admin_headers, timeout=60) as admin:
        key = admin.post("/v1/keys", json={"tenant": "mallory", "scopes": ["submit", "read"]}).json()["key"]
    with httpx.Client(base_url=hostile_stack.url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        yield client


def _c_family(path: str) -> list[str]:
    return [
        f'#include "{path}"\nint main(void) {{ return 0; }}\n',
        f'#line 1 "\x01"\n#include "{path}"\nint main(void) {{ return 0; }}\n',
        f'int\n#include "{path}"\n= 1;\nint main(void) {{ return 0; }}\n',
        f'#define STR(x) #x\nconst char *s =\n#include "{path}"\n;\nint main(void) {{ return 0; }}\n',
        f'#error\n#include "{path}"\n',
        f'__asm__(".incbin \\"{path}\\"");\nint main(void) {{ return 0; }}\n',
    ]


def _programs(planted: dict[str, str]) -> list[tuple[str, str]]:
    paths = [planted["admin_key_path"], planted["data_path"], planted["tmp_path"]]
    programs: list[tuple[str, str]] = []
    for path in paths:
        programs += [("c", source) for source in _c_family(path)]
        programs += [("cpp", source) for source in _c_family(path)]
        programs.append(("python", f"print(open({path!r}).read())\n"))
        programs.append(
            (
                "python",
                f"import sys\nsys.path.insert(0, {str(Path(path).parent)!r})\n"
                f"import {Path(path).stem.replace('-', '_')}\n",
            )
        )
        programs.append(
            (
                "java",
                "public class Main { public static void main(String[] a) throws Exception {"
                " System.out.print(new String(java.nio.file.Files.readAllBytes("
                f"java.nio.file.Path.of({json.dumps(path)}))));"
                " } }\n",
            )
        )
    # Walk the whole visible filesystem and print every file that looks like a key.
    programs.append(
        (
            "python",
            "import os\nfor root, dirs, files in os.walk('/'):\n"
            "    if root.startswith(('/proc', '/sys', '/usr')):\n        continue\n"
            "    for f in files:\n        p = os.path.join(root, f)\n"
            "        try:\n            print(p, open(p, errors='replace').read(200))\n        except OSError as e:\n"
            "            print(p, e)\n"
            "print(open('/proc/self/mountinfo').read())\nprint(open('/proc/1/environ', 'rb').read())\n",
        )
    )
    return programs


def _add_problem(client: httpx.Client, planted: dict[str, str]) -> str:
    """A problem with references in every language (so the reference judges run) and a public test."""
    problem_id = f"exfil-{uuid.uuid4().hex[:8]}"
    references = [
        {"language": "python", "source_code": "print(open('/etc/hostname').read())\n"},
        {"language": "c", "source_code": f'#include "{planted["admin_key_path"]}"\nint main(void){{return 0;}}\n'},
        {"language": "cpp", "source_code": "int main(){return 0;}\n"},
        {"language": "java", "source_code": "public class Main { public static void main(String[] a) {} }\n"},
    ]
    response = client.post(
        "/v1/problems",
        json={
            "problem_id": problem_id,
            "statement": "print nothing",
            "tests": [{"input": "", "expected": "", "public": True}],
            "references": references,
            "limits": {"cpu_time_s": 2, "wall_time_s": 10, "memory_mb": 256, "output_kb": 64},
        },
    )
    response.raise_for_status()
    return problem_id


def _assert_clean(text: str, planted: dict[str, str], where: str) -> None:
    for name in ("admin_key", "data_secret", "tmp_secret"):
        assert planted[name] not in text, f"{name} leaked through {where}"


def test_no_secret_reaches_any_response(attacker: httpx.Client, planted: dict[str, str]) -> None:
    problem_id = _add_problem(attacker, planted)
    programs = _programs(planted)
    batch = attacker.post(
        "/v1/attempts:batch",
        json={"attempts": [{"problem_id": problem_id, "language": lang, "source_code": src} for lang, src in programs]},
    )
    batch.raise_for_status()
    _assert_clean(batch.text, planted, "the batch answer")
    views = [wait_attempt(attacker, attempt_id, timeout_s=300) for attempt_id in batch.json()["attempt_ids"]]
    for program, view in zip(programs, views, strict=True):
        assert view["status"] == "done", (program, view)
        # Every judge that reads source ran on every attempt, and its row is clean.
        judged = {j["judge"] for j in view["judgments"]}
        assert set(OFFLINE) | {"scripted"} <= judged, judged
    # Every response a tenant can get for these objects, in full.
    responses = [attacker.get(f"/v1/attempts/{view['attempt_id']}").text for view in views]
    responses.append(attacker.get("/v1/attempts", params={"problem_id": problem_id, "limit": 500}).text)
    responses.append(attacker.get(f"/v1/jobs/{batch.json()['job_id']}").text)
    responses.append(attacker.get(f"/v1/problems/{problem_id}").text)
    for index, text in enumerate(responses):
        _assert_clean(text, planted, f"response {index}")
    # The lint rows in particular: the C/C++ include attempts produce findings or a classified failure.
    lint_errors = {j["error"] for view in views for j in view["judgments"] if j["judge"] == "lint" and j["error"]}
    for error in lint_errors:
        assert error.removeprefix("unavailable: ").startswith("lint: "), error


def test_direct_executions_leak_nothing(attacker: httpx.Client, planted: dict[str, str]) -> None:
    for language, source in _programs(planted):
        response = attacker.post(
            "/v1/executions",
            json={"language": language, "source_code": source, "stdin": "", "wait": True},
        )
        assert response.status_code in (200, 202), response.text
        _assert_clean(response.text, planted, f"a {language} execution")


def test_function_mode_cannot_read_secrets(attacker: httpx.Client, planted: dict[str, str]) -> None:
    source = (
        "import os\n"
        "def f():\n"
        "    found = []\n"
        f"    for path in {[planted['admin_key_path'], planted['data_path'], planted['tmp_path']]!r}:\n"
        "        try:\n            found.append(open(path).read())\n        except OSError as e:\n"
        "            found.append(str(e))\n"
        "    print(found)\n"
        "    return found\n"
    )
    response = attacker.post(
        "/v1/executions",
        json={
            "language": "python",
            "source_code": source,
            "mode": "function",
            "entry_point": "f",
            "tests": [{"input": [], "expected": []}, {"code": "def check(candidate):\n    assert candidate() == []\n"}],
            "wait": True,
        },
    )
    assert response.status_code == 200, response.text
    _assert_clean(response.text, planted, "a function-mode execution")
    assert [t["status"] for t in response.json()["tests"]] == ["WA", "WA"]


@pytest.mark.parametrize(
    "language, source",
    [
        ("python", "import sys\nwhile True:\n    sys.stderr.write('x' * 1000)\n"),
        ("python", "import os\nwhile True:\n    os.write(2, b'\\x00' * 65536)\n"),
        ("c", "#include <stdio.h>\nint main(void){for(;;)fputc('x',stderr);}\n"),
        ("java", "public class Main { public static void main(String[] a) { while (true) System.err.print('x'); } }\n"),
    ],
)
def test_floods_without_newlines_end_as_output_limit(attacker: httpx.Client, language: str, source: str) -> None:
    response = attacker.post(
        "/v1/executions",
        json={
            "language": language,
            "source_code": source,
            "stdin": "",
            "limits": {"cpu_time_s": 5, "wall_time_s": 20, "output_kb": 64},
            "wait": True,
        },
    )
    assert response.status_code == 200, response.text
    assert response.json()["verdict"] == "OLE", response.json()


def test_the_data_dir_is_private(hostile_stack: EmbeddedStack) -> None:
    assert stat.S_IMODE(hostile_stack.data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(hostile_stack.admin_key_path.stat().st_mode) == 0o600
    database = hostile_stack.data_dir / "tribunal.db"
    assert stat.S_IMODE(database.stat().st_mode) == 0o600
