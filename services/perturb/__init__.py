"""The perturbation generator: controlled defects and behaviour-preserving controls, verified by execution, to make
ground truth for measuring judges (paper 001 V-D, AXIOM III-B/C, LoCaL 3.3.2). The operators are the pure library
`services/lib/mutation/` (parse trees in, mutants out); this service's worker turns mutants into attempts through the
kernel's lifecycle and verifies them (docs/perturbation.md)."""
