"""The offline all-MiniLM-L6-v2 runtime (NumPy) against the reference implementation's vectors.

`minilm_reference.json` was computed once with sentence-transformers 6.2.0 on PyTorch 2.14.1 from the same weight
file (make_minilm_reference.py says how): token ids of the model's own tokenizer and the `encode` vectors, for the
model card's two example sentences, four requirement-like texts (one full of accents, CJK, emoji and odd spaces)
and one text past the 256-token limit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from services.perturb.axiom.embedding import EmbeddingModelUnavailable, MiniLMEmbedder, default_model_dir

REFERENCE = json.loads((Path(__file__).with_name("minilm_reference.json")).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_the_tokenizer_gives_the_reference_tokenizers_ids(embedder: MiniLMEmbedder) -> None:
    for item in REFERENCE["items"]:
        assert embedder.token_ids(item["text"]) == item["token_ids"], item["text"][:40]
    assert len(REFERENCE["items"][-1]["token_ids"]) == 256  # truncated like the model


def test_the_two_model_card_sentences_match_the_reference_vectors_to_1e_4(embedder: MiniLMEmbedder) -> None:
    first, second = REFERENCE["items"][:2]
    assert (first["text"], second["text"]) == ("This is an example sentence", "Each sentence is converted")
    vectors = embedder.embed([first["text"], second["text"]])
    assert vectors.shape == (2, 384)
    np.testing.assert_allclose(vectors[0], first["embedding"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(vectors[1], second["embedding"], atol=1e-4, rtol=0)
    # Measured agreement is far tighter: float32 rounding only.
    assert np.abs(vectors - np.array([first["embedding"], second["embedding"]])).max() < 1e-5


def test_every_reference_text_matches_and_vectors_are_unit_length(embedder: MiniLMEmbedder) -> None:
    texts = [item["text"] for item in REFERENCE["items"]]
    vectors = embedder.embed(texts)
    reference = np.array([item["embedding"] for item in REFERENCE["items"]])
    assert np.abs(vectors - reference).max() < 1e-5
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    # A text's vector does not depend on what else is embedded with it.
    np.testing.assert_allclose(embedder.embed([texts[3]])[0], vectors[3], atol=1e-7)


def test_cosine_similarity_orders_related_requirements_first(embedder: MiniLMEmbedder) -> None:
    anchor, paraphrase, unrelated = embedder.embed(
        [
            "Return the sum of all even numbers in a list of integers.",
            "Given a list of integers, add up the ones that are even and return the total.",
            "Parse an HTTP date header and convert it to a Unix timestamp.",
        ]
    )
    assert anchor @ paraphrase > 0.7 > 0.3 > anchor @ unrelated


def test_weights_that_are_not_the_pinned_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (tmp_path / "tokenizer.json").write_text((default_model_dir() / "tokenizer.json").read_text(encoding="utf-8"))
    with pytest.raises(EmbeddingModelUnavailable, match="sha256"):
        MiniLMEmbedder(tmp_path)
    with pytest.raises(EmbeddingModelUnavailable):
        MiniLMEmbedder(tmp_path / "missing")
