"""The perturbation generator: controlled defects and behaviour-preserving controls, verified by execution, to make
ground truth for measuring judges (paper 001 V-D, AXIOM III-B/C, LoCaL 3.3.2). The operators are the pure library
`services/lib/mutation/` (parse trees in, mutants out); this service turns mutants into attempts through the kernel's
lifecycle (`perturbation.py`) and verifies them (`verification.py`); AXIOM's synthesis is `synthesis.py` and
`benchmark.py` over the pure `axiom/` package; `worker.py` wires the tasks to one worker (docs/perturbation.md)."""
