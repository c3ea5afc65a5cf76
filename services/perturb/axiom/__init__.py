"""AXIOM's rule-based LLM synthesis (paper 000, III-B and III-C): quality-constrained perturbation
(`synthesis.py`), context disruption (`disruption.py`), representative selection (`selection.py`), rule sequences
(`sequences.py`), the offline requirement embeddings (`embedding.py`) and the calibration report (`calibration.py`).
Pure, or async with the LLM runner injected; the perturb service's synthesis job (services/perturb/synthesis.py and
benchmark.py) wires them to the queue and the database. The rule
catalogue and the benchmark's record shape live in the pure mutation library (`services/lib/mutation/axiom_rules.py`,
`axiom_rules.toml`, `axiom_records.py`), where the gateway can read them too. See docs/axiom.md."""
