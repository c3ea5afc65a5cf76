"""The judge service: every attempt judged under a strict schema, by LLM and offline judges."""
