"""The names the queue and the job_unit rows use, built and parsed here and nowhere else.

A task's subject (services/kernel/registry.py `Work`) is either a bare id (an attempt at one of its stages, a
direct execution's or a synthesis' final step's job, a report) or a `Subject`: one item of one job, written
`<item>@<job>`. The items: an attempt (re-judging, perturbing a seed, a calibration report), a similarity pair's
ordinal, a synthesis draw (`<slot>:<draw>`).

A job's units (its job_unit rows, services/kernel/jobs.py) say what of it is done, each once:
    `<attempt>`                     an attempt judged under the job's plan (the judge worker counts it)
    `perturb:<attempt>`             a perturbation job's seed perturbed (its mutants created)
    `seed:<attempt>`                a confirmation job's seed whose (seed, mutant) pairs are all in
    `pair:<ordinal>`                a similarity job's pair scored (or failed for good)
    `axiom:<slot>`                  a synthesis slot filled (a kept program) or given up (its draws ran out)
    `axiom:final`                   context disruption and representative selection done
    `report:<attempt>`              a representative's calibration report prepared
    `draw:<slot>:<draw>:<outcome>`  what one draw of a slot gave (a record, not counted): `candidate` (its
                                    program is being executed and verified), then `kept` or `mismatch`; why the
                                    LLM step gave no program; `duplicate`, `error`, or `cancelled`
A synthesis slot is `r<requirement>:t<target>:<index>`: the `index`-th program of `target` score for the job's
`requirement`-th requirement (paper 000: M programs per target per requirement).

tests/services/kernel/test_subjects.py checks that no other product module spells these.
"""

from __future__ import annotations

from dataclasses import dataclass

_AT = "@"


@dataclass(frozen=True)
class Subject:
    """One item of one job, as a task's subject: `<item>@<job>`."""

    item: str
    job_id: str

    def __str__(self) -> str:
        return f"{self.item}{_AT}{self.job_id}"

    @classmethod
    def parse(cls, text: str) -> Subject | None:
        """The subject `text` names, or None for a bare id (a subject of no job). Job ids never hold `@`, so the
        last one separates the item from the job."""
        item, at, job_id = text.rpartition(_AT)
        return cls(item, job_id) if at else None


def job_subject(item: str | int, job_id: str) -> str:
    """The task subject of `item` (an attempt id, a pair's ordinal) of job `job_id`."""
    return str(Subject(str(item), job_id))


def pair_subject(job_id: str, ordinal: int) -> str:
    """The task subject of a similarity job's pair: `<ordinal>@<job>`."""
    return job_subject(ordinal, job_id)


def parse_pair_subject(text: str) -> tuple[str, int]:
    """(job, ordinal) of a pair's subject. Raises ValueError for anything else."""
    subject = Subject.parse(text)
    if subject is None:
        raise ValueError(f"not a pair subject: {text!r}")
    return subject.job_id, int(subject.item)


def draw_subject(slot: str, draw: int, job_id: str) -> str:
    """The task subject of draw `draw` of a synthesis slot: `<slot>:<draw>@<job>`."""
    return job_subject(f"{slot}:{draw}", job_id)


def parse_draw_subject(text: str) -> tuple[str, int, str]:
    """`r0:t4:1:2@job` -> (slot `r0:t4:1`, draw 2, job). Raises ValueError for anything else."""
    subject = Subject.parse(text)
    if subject is None:
        raise ValueError(f"not a draw subject: {text!r}")
    slot, _, draw = subject.item.rpartition(":")
    return slot, int(draw), subject.job_id


# ---- job units -----------------------------------------------------------------------------------------------

_PERTURBED = "perturb:"
_CONFIRMED_SEED = "seed:"
_PAIR = "pair:"
_SLOT = "axiom:"
_REPORT = "report:"
_DRAW = "draw:"

SYNTHESIS_FINAL = f"{_SLOT}final"
# The outcomes a draw records besides why the LLM step gave no program (services/perturb/axiom FailureKind).
DRAW_CANDIDATE = "candidate"
DRAW_KEPT = "kept"
DRAW_MISMATCH = "mismatch"
DRAW_DUPLICATE = "duplicate"
DRAW_ERROR = "error"
DRAW_CANCELLED = "cancelled"  # a draw that had not ended when its job was cancelled


def judged_unit(attempt_id: str) -> str:
    """The unit counted once an attempt is judged under its job's plan (re-judge, perturbation, synthesis jobs)."""
    return attempt_id


def perturbed_unit(attempt_id: str) -> str:
    """The unit that says a perturbation job's seed has been perturbed (its mutants created)."""
    return f"{_PERTURBED}{attempt_id}"


def confirmation_seed_unit(attempt_id: str) -> str:
    """The confirmation job's unit that says a seed's (seed, mutant) pairs are in."""
    return f"{_CONFIRMED_SEED}{attempt_id}"


def pair_unit(ordinal: int) -> str:
    """The unit counted once a similarity job's pair `ordinal` is scored (or has failed for good)."""
    return f"{_PAIR}{ordinal}"


def synthesis_slot(requirement: int, target: int, index: int) -> str:
    """The name of the `index`-th program of `target` score for the job's `requirement`-th requirement."""
    return f"r{requirement}:t{target}:{index}"


def parse_synthesis_slot(slot: str) -> tuple[int, int, int]:
    """(requirement, target, index) of a slot name. Raises ValueError."""
    requirement, target, index = slot.split(":")
    if not requirement.startswith("r") or not target.startswith("t"):
        raise ValueError(f"not a synthesis slot: {slot!r}")
    return int(requirement[1:]), int(target[1:]), int(index)


def slot_unit(slot: str) -> str:
    """The unit counted once a synthesis slot is filled or given up."""
    return f"{_SLOT}{slot}"


def report_unit(attempt_id: str) -> str:
    """The unit counted once a representative's calibration report is prepared."""
    return f"{_REPORT}{attempt_id}"


def draw_unit(slot: str, draw: int, outcome: str) -> str:
    """The record of what draw `draw` of `slot` gave (not counted)."""
    return f"{_DRAW}{slot}:{draw}:{outcome}"


def parse_draw_unit(unit: str) -> tuple[str, int, str] | None:
    """(slot, draw, outcome) of a draw record; None for any other unit."""
    if not unit.startswith(_DRAW):
        return None
    slot, draw, outcome = unit.removeprefix(_DRAW).rsplit(":", 2)
    return slot, int(draw), outcome


def context_pair_ref(slot: str) -> str:
    """How a synthesis job's final step names a planned 0-point pair (slot `r<i>:t0:<k>`) until it is an attempt
    (representative selection runs before the pairs are created). Not a unit."""
    return f"{_PAIR}{slot}"
