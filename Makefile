# Tribunal's front door. `make demo` and `make test` set everything up first, on a fresh machine too.
.PHONY: setup demo test lint bench up clean

setup:
	@bash scripts/setup.sh

demo: setup
	.venv/bin/tribunal demo

up: setup
	.venv/bin/tribunal up

test: setup
	.venv/bin/python -m pytest -q -p no:cacheprovider --durations=30

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
