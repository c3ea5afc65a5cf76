"""The language ids a deployment can run (api.md); the executor owns how each one compiles and runs."""

from __future__ import annotations

from typing import Literal

LanguageId = Literal["python", "c", "cpp", "java"]
LANGUAGE_IDS: tuple[LanguageId, ...] = ("python", "c", "cpp", "java")

# The executor worker publishes its toolchain versions here at start; the gateway serves them.
LANGUAGES_KEY = "tribunal:languages"
