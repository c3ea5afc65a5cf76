"""`sample_tests`: an attempt judged by its own results on the problem's public tests (the co-creation rubric)."""

from __future__ import annotations

from typing import Any

from judge.offline.scores import OfflineNotApplicable, OfflineScore, OfflineUnavailable, grade, round_half_up
from services.kernel.contracts import Verdict

# Logic failures lower s_algo; resource failures lower s_robust; IE is the platform's fault, not the program's.
_LOGIC_FAILURES = frozenset({Verdict.WA, Verdict.RE})
_RESOURCE_FAILURES = frozenset({Verdict.TLE, Verdict.MLE, Verdict.OLE})
_TEST_STATUSES = frozenset({Verdict.AC, Verdict.IE}) | _LOGIC_FAILURES | _RESOURCE_FAILURES


def sample_tests(
    execution_tests: list[dict[str, Any]], *, compile_error: bool = False, public_total: int | None = None
) -> OfflineScore:
    """Judge an attempt by its results on the public tests only.

    Mapping, over the public tests with a verdict (tests that ended in IE, an internal error of the platform,
    are left out: they say nothing about the program):

    - p_ac = (passed + 1) / (public + 2): Laplace's rule of succession, so never exactly 0 or 1 (passing every
      public test is evidence, not proof, that the hidden tests pass). E.g. 3 of 4 passed -> 4/6.
    - s_algo = 1 + round(4 * (1 - logic_failures / public)), logic failures being WA and RE.
    - s_robust = 1 + round(4 * (1 - resource_failures / public)), resource failures being TLE, MLE and OLE.
    - score (0..5) = round(5 * p_ac).

    A compile error (`compile_error=True`; the caller passes `public_total`, the problem's number of public tests,
    because a CE attempt has no per-test results) means no test can pass: p_ac = 1 / (public_total + 2), and
    s_algo = s_robust = 1 (a program that does not build fails even the basic cases). Outside a compile error,
    `public_total` only words the reason when there are no public results to judge.

    Args:
        execution_tests: The stored per-test results: dicts with "index", "status" (AC/WA/TLE/MLE/OLE/RE/IE),
            "public" (bool), "time_ms", "memory_kb".
        compile_error: The attempt did not compile.
        public_total: The number of public tests of the problem.

    Raises:
        OfflineNotApplicable: the problem has no public tests.
        OfflineUnavailable: the execution left no results for the problem's public tests, or every public test
            ended in an internal error (the platform's fault: a re-judge after a re-run may score it).
        ValueError: a test has a status outside AC/WA/TLE/MLE/OLE/RE/IE.
    """
    if compile_error:
        if not public_total or public_total <= 0:
            raise OfflineNotApplicable("no public tests")
        p_ac = 1 / (public_total + 2)
        rationale = (
            f"Compile error: none of the {public_total} public tests can pass; "
            f"p_ac = 1/{public_total + 2} = {p_ac:.2f} (Laplace)."
        )
        return _sample_score(p_ac, 1, 1, rationale)

    public = [test for test in execution_tests if test.get("public") is True]
    for test in public:
        if test.get("status") not in _TEST_STATUSES:
            raise ValueError(f"public test {test.get('index')} has unknown status {test.get('status')!r}")
    if not public:
        if public_total:  # the problem has public tests but the execution left no results (e.g. a build IE)
            raise OfflineUnavailable(f"no results for the problem's {public_total} public tests")
        raise OfflineNotApplicable("no public tests")
    judged = [test for test in public if test["status"] != Verdict.IE]
    internal = len(public) - len(judged)
    if not judged:
        raise OfflineUnavailable(f"every public test ({internal}) ended in an internal error")

    total = len(judged)
    passed = sum(test["status"] == Verdict.AC for test in judged)
    logic = sum(test["status"] in _LOGIC_FAILURES for test in judged)
    resource_failures = sum(test["status"] in _RESOURCE_FAILURES for test in judged)
    p_ac = (passed + 1) / (total + 2)
    s_algo = 1 + round_half_up(4 * (1 - logic / total))
    s_robust = 1 + round_half_up(4 * (1 - resource_failures / total))

    failed = [f"#{test.get('index')} {test['status']}" for test in judged if test["status"] != Verdict.AC]
    rationale = f"{passed} of {total} public tests passed"
    rationale += f"; failed: {', '.join(failed)}" if failed else ""
    rationale += f"; {internal} ended in an internal error and were not counted" if internal else ""
    rationale += f". p_ac = {passed + 1}/{total + 2} = {p_ac:.2f} (Laplace)."
    return _sample_score(p_ac, s_algo, s_robust, rationale)


def _sample_score(p_ac: float, s_algo: int, s_robust: int, rationale: str) -> OfflineScore:
    fields = {"p_ac": p_ac, "s_algo": s_algo, "s_robust": s_robust, "rationale": rationale}
    return OfflineScore(p_ac=p_ac, score=float(grade(p_ac)), fields=fields, rationale=rationale)
