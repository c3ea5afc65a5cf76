"""The floor of a run in fresh namespaces with no Python in the way: the per-run work of a reusable jail
(services/lib/sandbox/zygote.py) written in C (bench/floor/run_chain.c), against spawning the same program directly,
in the same run. It answers how much of a trivial compiled program's sandbox overhead any zygote would keep.

    .venv/bin/python bench/bench_namespace_floor.py [--runs 500] [--repeats 3]      (as root)

Rows: the program spawned directly; the same behind the two forks a run needs (setup process, run's first
process); plus fresh mount, IPC and PID namespaces with tmpfs and /proc mounted; plus a network namespace with
loopback up (what every run gets). Each row: median wall time per run and CPU time per run (all processes), the
median over the repeats with the range; the variants alternate within each repeat so they share the machine's
load. Results go to bench/results/namespace_floor.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).parent
TRIVIAL_C = "int main(void) { return 0; }\n"
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x08000000, 0x20000000, 0x40000000
VARIANTS = {
    "program spawned directly": "direct",
    "+ two forks (setup, first process)": "0",
    "+ mount, IPC, PID namespaces, tmpfs, /proc": f"{CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID:x}",
    "+ network namespace, loopback up": f"{CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET:x}",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500, help="runs per variant and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        chain, program = tmp / "run_chain", tmp / "trivial"
        (tmp / "trivial.c").write_text(TRIVIAL_C)
        subprocess.run(["gcc", "-O2", "-o", str(chain), str(HERE / "floor" / "run_chain.c")], check=True)
        subprocess.run(["gcc", "-O2", "-o", str(program), str(tmp / "trivial.c")], check=True)
        for folder in ("a", "b"):
            (tmp / folder).mkdir()
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in VARIANTS}
        for _ in range(args.repeats):
            for name, flags in VARIANTS.items():
                argv = [str(chain), str(args.runs), flags, str(tmp / "a"), str(tmp / "b"), str(program)]
                out = subprocess.run(["unshare", "-m", *argv], check=True, capture_output=True, text=True).stdout
                wall_ms, cpu_ms = (float(value) for value in out.split())
                samples[name].append((wall_ms, cpu_ms))
    table = Table(title=f"A run's floor in C ({args.runs} runs x {args.repeats} repeats)")
    for column in ("variant", "wall / run (ms)", "CPU / run (ms)", "wall over direct (ms)"):
        table.add_column(column)
    direct_wall = statistics.median(wall for wall, _ in samples["program spawned directly"])
    results = {}
    for name, runs in samples.items():
        walls, cpus = [wall for wall, _ in runs], [cpu for _, cpu in runs]
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        results[name] = {"wall_ms": wall, "cpu_ms": cpu, "wall_range": [min(walls), max(walls)]}
        table.add_row(
            name, f"{wall:.2f} ({min(walls):.2f}-{max(walls):.2f})", f"{cpu:.2f}", f"+{wall - direct_wall:.2f}"
        )
    Console().print(table)
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    (out_dir / "namespace_floor.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    if shutil.which("gcc") is None or shutil.which("unshare") is None:
        raise SystemExit("needs gcc and unshare (util-linux), and root")
    main()
