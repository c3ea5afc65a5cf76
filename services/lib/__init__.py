"""The pure libraries: sandbox, llm, codesim, mutation, fuzzing, datasets.

Each builds on the kernel only (services.kernel), never on a service, the gateway or another library except
through that library's public surface; the import-linter contracts in pyproject.toml check it. None but llm
touches the network, and none touches the database or the queue.
"""
