"""Writes each problem's tests.json here from Python reference solutions (deterministic: a seeded generator).

Run from the project root: `.venv/bin/python tests/services/lib/mutation/programs/make_tests.py`. The C, C++ and
Java programs beside the tests are the accepted solutions the perturbation tests mutate;
tests/services/lib/mutation/test_programs.py checks that each of them passes these tests in the real sandbox.
"""

import json
import random
from pathlib import Path

ROOT = Path(__file__).parent
rng = random.Random(2024)


def write(name, cases):
    tests = [{"input": i, "expected": e} for i, e in cases]
    (ROOT / name / "tests.json").write_text(json.dumps(tests, indent=1) + "\n")


def prefix_max(a):
    t, best = 0, None
    for x in a:
        t += x
        best = t if best is None or t > best else best
    return f"{t} {best}\n"


cases = []
for a in (
    [3, -1, 4, -10, 2],
    [-5, -2, -7],
    [rng.randint(900_000_000, 1_000_000_000) for _ in range(600)],
    [rng.randint(-1_000_000_000, 1_000_000_000) for _ in range(500)],
):
    cases.append((f"{len(a)}\n{' '.join(map(str, a))}\n", prefix_max(a)))
write("prefix_max", cases)


def range_sum(a, qs):
    pre = [0]
    for x in a:
        pre.append(pre[-1] + x)
    return "".join(f"{pre[r] - pre[left - 1]}\n" for left, r in qs)


cases = []
for n, hi, q in ((5, 10, 4), (1, 7, 1), (500, 1_000_000_000, 40), (300, 1_000_000, 30)):
    a = [rng.randint(-hi if n == 300 else 0, hi) for _ in range(n)]
    qs = [(1, n), (n, n)] + [tuple(sorted((rng.randint(1, n), rng.randint(1, n)))) for _ in range(q)]
    if n >= 2:
        qs.append((1, 1))
    inp = f"{n} {len(qs)}\n{' '.join(map(str, a))}\n" + "".join(f"{left} {r}\n" for left, r in qs)
    cases.append((inp, range_sum(a, qs)))
write("range_sum", cases)


def count_in_range(lo, hi, a):
    inside = [v for v in a if lo <= v <= hi]
    return f"{len(inside)} {sum(inside)}\n"


cases = []
for lo, hi, a in (
    (3, 7, [1, 3, 5, 7, 9, 7, 3]),
    (10, 10, [10, 9, 11, 10]),
    (0, 0, [1, 2]),
    (
        2_000_000_000,
        5_000_000_000,
        [rng.choice([2_000_000_000, 5_000_000_000, rng.randint(1_999_999_990, 5_000_000_010)]) for _ in range(300)],
    ),
):
    cases.append((f"{len(a)} {lo} {hi}\n{' '.join(map(str, a))}\n", count_in_range(lo, hi, a)))
write("count_in_range", cases)


def kadane(a):
    best, cur = a[0], 0
    for x in a:
        cur = max(cur + x, x)
        best = max(best, cur)
    return best


cases = []
for a in (
    [2, -3, 4, -1, 2, 1, -5, 4],
    [-3, -1, -2],
    [7],
    [rng.randint(500_000_000, 1_000_000_000) for _ in range(300)],
    [rng.randint(-1_000_000_000, 1_000_000_000) for _ in range(500)],
):
    cases.append((f"{len(a)}\n{' '.join(map(str, a))}\n", a))
write("max_subarray", [(i, f"{kadane(a)}\n") for i, a in cases])
# The C++ version also prints the sum of absolute values on a second line.
(ROOT / "max_subarray" / "tests.cpp.json").write_text(
    json.dumps([{"input": i, "expected": f"{kadane(a)}\n{sum(abs(x) for x in a)}\n"} for i, a in cases], indent=1)
    + "\n"
)


def fib(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, (a + b) % 1_000_000_007
    return f"{a}\n"


write("fib_mod", [(f"{n}\n", fib(n)) for n in (1, 2, 10, 45, 100_000)])


def pair_sums(target, a):
    pairs, largest = 0, 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            s = a[i] + a[j]
            pairs += s == target
            largest = max(largest, s)
    return f"{pairs} {largest}\n"


cases = []
for target, a in (
    (6, [1, 5, 3, 3, 2, 4]),
    (10, [5]),
    (2_200_000_000, [1_100_000_000] * 4 + [1_099_999_999, 1]),
    (0, [rng.randint(-50, 50) for _ in range(300)]),
):
    cases.append((f"{len(a)} {target}\n{' '.join(map(str, a))}\n", pair_sums(target, a)))
write("pair_sums", cases)


def case_lines(pairs):
    return "".join(f"Case #{k + 1}: {a + b}\n" for k, (a, b) in enumerate(pairs))


cases = []
for pairs in (
    [(1, 2), (3, 4)],
    [(-5, 5)],
    [(rng.randint(-(10**12), 10**12), rng.randint(-(10**12), 10**12)) for _ in range(20)],
):
    cases.append((f"{len(pairs)}\n" + "".join(f"{a} {b}\n" for a, b in pairs), case_lines(pairs)))
write("case_lines", cases)


def grid(g):
    h, w = len(g), len(g[0])
    ways = [[0] * w for _ in range(h)]
    for i in range(h):
        for j in range(w):
            if g[i][j] == "#":
                continue
            if i == 0 and j == 0:
                ways[i][j] = 1
                continue
            ways[i][j] = ((ways[i - 1][j] if i else 0) + (ways[i][j - 1] if j else 0)) % 1_000_000_007
    return f"{ways[h - 1][w - 1]}\n"


grids = [
    ["...", ".#.", "..."],
    ["."],
    ["#."],
    [".#", "#."],
    ["".join("#" if rng.random() < 0.1 and (i, j) != (0, 0) else "." for j in range(60)) for i in range(60)],
    ["." * 45 for _ in range(45)],
]
write("grid_paths", [(f"{len(g)} {len(g[0])}\n" + "".join(r + "\n" for r in g), grid(g)) for g in grids])
print("ok")
