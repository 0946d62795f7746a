"""A Whisper model of a given shape with random weights, written straight as a CTranslate2 model folder.

It exists for the GPU proof: a large-v3-shaped model shows how Scriba sizes its batch and what the GPU's memory
does, without carrying 3 GB of real weights to a machine that takes 60 MiB a call. Its words are noise: it is
never used for accuracy. No converter, no transformers and no hub: the CTranslate2 spec is filled by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class WhisperShape:
    name: str
    layers: int  # encoder and decoder alike
    width: int
    heads: int
    mel_bins: int
    vocabulary: int


# openai/whisper-large-v3's published configuration (1.55 B parameters).
LARGE_V3 = WhisperShape("large-v3", layers=32, width=1280, heads=20, mel_bins=128, vocabulary=51866)
# A shape small enough to build in a second, for the tests of this module.
TINY = WhisperShape("tiny-shape", layers=2, width=64, heads=2, mel_bins=80, vocabulary=51865)

AUDIO_POSITIONS = 1500  # 30 s of 20 ms encoder frames
TEXT_POSITIONS = 448


class _Weights:
    """Random values from one shared pool: building 1.5 B parameters one draw at a time takes minutes."""

    def __init__(self, seed: int = 0, pool: int = 1 << 24) -> None:
        self._pool = (np.random.default_rng(seed).standard_normal(pool, dtype=np.float32) * 0.02).astype(np.float16)
        self._offset = 0

    def normal(self, *shape: int) -> np.ndarray:
        count = int(np.prod(shape))
        repeats = -(-count // len(self._pool))
        start = self._offset % len(self._pool)
        self._offset += 7919  # a prime step: neighbouring tensors do not start on the same values
        values = np.roll(self._pool, -start) if repeats == 1 else np.tile(self._pool, repeats)
        return np.ascontiguousarray(values[:count].reshape(shape))


def _linear(spec: object, weights: _Weights, out_features: int, in_features: int) -> None:
    spec.weight = weights.normal(out_features, in_features)  # type: ignore[attr-defined]
    spec.bias = np.zeros(out_features, dtype=np.float16)  # type: ignore[attr-defined]


def _norm(spec: object, width: int) -> None:
    spec.gamma = np.ones(width, dtype=np.float16)  # type: ignore[attr-defined]
    spec.beta = np.zeros(width, dtype=np.float16)  # type: ignore[attr-defined]


def _vocabulary(shape: WhisperShape, tokenizer_json: Path) -> tuple[list[str], list[int]]:
    """The tokens by id, and the ids of the language tokens. CTranslate2 finds the special tokens by their text
    in this list, and faster-whisper by their id in tokenizer.json: both must agree, so the list is read from the
    tokenizer, and padded with timestamp tokens up to the shape's size."""
    document = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    by_id = {int(index): str(token) for token, index in document["model"]["vocab"].items()}
    by_id.update({int(added["id"]): str(added["content"]) for added in document.get("added_tokens", [])})
    first_timestamp = max(by_id) + 1
    tokens: list[str] = []
    for index in range(shape.vocabulary):
        tokens.append(by_id.get(index, f"<|{(index - first_timestamp) * 0.02:.2f}|>"))
    languages = [index for index, token in enumerate(tokens) if re.fullmatch(r"<\|[a-z]{2,3}\|>", token)]
    return tokens, languages


def build(shape: WhisperShape, out_dir: Path, tokenizer_json: Path, seed: int = 0) -> Path:
    """Write the model folder (model.bin, config.json, vocabulary, tokenizer.json); returns it."""
    from ctranslate2.specs import whisper_spec

    d = shape.width
    ffn = 4 * d
    weights = _Weights(seed)
    spec = whisper_spec.WhisperSpec(shape.layers, shape.heads, shape.layers, shape.heads)
    encoder = spec.encoder
    encoder.conv1.weight = weights.normal(d, shape.mel_bins, 3)
    encoder.conv1.bias = np.zeros(d, dtype=np.float16)
    encoder.conv2.weight = weights.normal(d, d, 3)
    encoder.conv2.bias = np.zeros(d, dtype=np.float16)
    encoder.position_encodings.encodings = weights.normal(AUDIO_POSITIONS, d)
    _norm(encoder.layer_norm, d)
    for layer in encoder.layer:
        _norm(layer.self_attention.layer_norm, d)
        _linear(layer.self_attention.linear[0], weights, 3 * d, d)  # queries, keys and values fused
        _linear(layer.self_attention.linear[1], weights, d, d)
        _norm(layer.ffn.layer_norm, d)
        _linear(layer.ffn.linear_0, weights, ffn, d)
        _linear(layer.ffn.linear_1, weights, d, ffn)
    decoder = spec.decoder
    decoder.embeddings.weight = weights.normal(shape.vocabulary, d)
    decoder.position_encodings.encodings = weights.normal(TEXT_POSITIONS, d)
    _norm(decoder.layer_norm, d)
    decoder.projection.weight = decoder.embeddings.weight
    for layer in decoder.layer:
        _norm(layer.self_attention.layer_norm, d)
        _linear(layer.self_attention.linear[0], weights, 3 * d, d)
        _linear(layer.self_attention.linear[1], weights, d, d)
        _norm(layer.attention.layer_norm, d)
        _linear(layer.attention.linear[0], weights, d, d)  # queries
        _linear(layer.attention.linear[1], weights, 2 * d, d)  # keys and values of the audio, fused
        _linear(layer.attention.linear[2], weights, d, d)
        _norm(layer.ffn.layer_norm, d)
        _linear(layer.ffn.linear_0, weights, ffn, d)
        _linear(layer.ffn.linear_1, weights, d, ffn)
    tokens, languages = _vocabulary(shape, tokenizer_json)
    end_of_text = tokens.index("<|endoftext|>")
    config = spec.config
    config.suppress_ids = [220, end_of_text]
    config.suppress_ids_begin = [220, end_of_text]
    config.lang_ids = languages
    half = shape.layers // 2
    config.alignment_heads = [(layer, head) for layer in range(half, shape.layers) for head in range(shape.heads)]
    spec.register_vocabulary(tokens)
    spec.validate()
    spec.optimize(quantization="float16")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    spec.save(str(out_dir))
    shutil.copy(tokenizer_json, out_dir / "tokenizer.json")
    # faster-whisper reads the feature size from here (128 mel bins for large-v3, 80 before).
    (out_dir / "preprocessor_config.json").write_text(
        json.dumps({"feature_size": shape.mel_bins, "sampling_rate": 16000, "hop_length": 160, "chunk_length": 30})
    )
    (out_dir / "RANDOM_WEIGHTS").write_text(
        f"{shape.name}-shaped Whisper with random weights: for memory and batch sizing only, never for words.\n"
    )
    return out_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=["large-v3", "tiny-shape"], default="large-v3")
    parser.add_argument("--tokenizer", type=Path, required=True, help="the tokenizer.json to put beside the model")
    args = parser.parse_args(argv)
    shape = LARGE_V3 if args.shape == "large-v3" else TINY
    print(build(shape, args.out, args.tokenizer))
    return 0


if __name__ == "__main__":
    sys.exit(main())
