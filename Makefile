# Tribunal's front door. `make demo` and `make test` set everything up first, on a fresh machine too.
.PHONY: setup demo test check lint bench up clean

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/tribunal demo

up: setup
	.venv/bin/tribunal up

# The tiers (README, "Tests"): unit, jail, stack, corpus. Two workers (pytest-xdist); a module's tests stay on one
# worker (--dist loadfile), whose fixtures (its Redis, PostgreSQL and process stacks) are its own.
PYTEST = .venv/bin/python -m pytest -q -p no:cacheprovider -n 2 --dist loadfile --durations=30

test: setup
	$(PYTEST)

# Unit and jail tests only: no server, no corpus.
check: setup
	$(PYTEST) -m "not stack and not corpus"

lint: setup
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy services gateway executor judge metrics
	.venv/bin/lint-imports --no-cache

bench: setup
	.venv/bin/python bench/run.py
	.venv/bin/python bench/bench_humaneval.py --repeats 3
	.venv/bin/python bench/bench_lint.py
	.venv/bin/python bench/bench_namespace_floor.py
	.venv/bin/python bench/bench_judge.py
	.venv/bin/python bench/bench_perturb.py
	.venv/bin/python bench/bench_differential.py
	.venv/bin/python bench/bench_similarity.py
	.venv/bin/python bench/bench_load.py --quick
	.venv/bin/python bench/bench_scrape.py

clean:
	rm -rf .venv .tribunal .pytest_cache .mypy_cache .ruff_cache
