"""The test-code analyser: runs inside nsjail as `python3 -I -S -B <this file>` (stdlib only, one file, the jail's
Python 3.11, the interpreter the executor's function-mode harness runs test code with). It never runs the code: it
parses it (`ast`) and lists the names it reads but never binds.

stdin: one JSON object {"entry_point": str, "tests": [[index, code], ...]}.
stdout: one JSON line per test as it is analysed, in order, so that a test that exhausts the jail's limits is
        the first one without a line: {"i": index} (no finding), {"i": index, "names": [...]} (names it reads and
        never binds), {"i": index, "syntax": line or 0} (it does not parse), {"i": index, "deep": 1} (nested too
        deeply for the parser).

Which names test code can see is exactly what executor/harness/function_runner.py gives it: `candidate`, the
entry point, `__name__`, and the built-ins (with `exit`, `quit`, `help`, `copyright`, `credits` and `license`, which
the harness adds as `site` does); nothing of the candidate module. `undefined_names` is the harness's own rule
(tests/gateway/test_problem_checks.py checks that both agree), scope-blind on purpose: a name bound anywhere
in the code counts as bound, so the check can miss a broken test but never refuses a working one.
"""

import ast
import builtins
import json
import site
import sys


def undefined_names(tree: ast.AST, entry_point: str) -> list[str]:
    bound = {"candidate", entry_point, "__name__", "__file__", "__builtins__"}
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return []
                bound.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return sorted(name for name in loaded - bound if not hasattr(builtins, name))


def analyse(index: int, code: str, entry_point: str) -> dict[str, object]:
    try:
        tree = ast.parse(code, "<test>")
        # What the harness does next: compile() catches what the parser lets through (a `return` outside a
        # function, `nonlocal` at module level).
        compile(tree, "<test>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        if "too many nested" in str(exc.msg) or "too complex" in str(exc.msg):
            return {"i": index, "deep": 1}
        return {"i": index, "syntax": exc.lineno if type(exc.lineno) is int else 0}
    except (RecursionError, MemoryError):
        return {"i": index, "deep": 1}
    except Exception:  # a NUL byte or a lone surrogate in the source (ValueError), or what else compile refuses
        return {"i": index, "syntax": 0}
    names = undefined_names(tree, entry_point)
    return {"i": index, "names": names[:20]} if names else {"i": index}


def main() -> None:
    # The names the harness adds to the built-ins as `site` does (it runs with -S too).
    site.setquit()
    site.setcopyright()
    site.sethelper()
    request = json.loads(sys.stdin.buffer.read())
    entry_point = request["entry_point"]
    out = sys.stdout
    for index, code in request["tests"]:
        out.write(json.dumps(analyse(index, code, entry_point)) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
