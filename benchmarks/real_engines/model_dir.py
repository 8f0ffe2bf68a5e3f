"""A model folder that vLLM serves with `--load-format dummy`: the model's real config.json (real
shapes, so real speed) and a generated word-level tokenizer over `w0 .. w<vocab_size-1>`, so that a
prompt of k words is exactly k tokens. Written as plain JSON (no tokenizers import), the format
that `tokenizers` reads: a WordLevel model with a whitespace pre-tokenizer.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

# Beside config.json, what declares a ModelOpt checkpoint's quantization (FP8 weights, FP8 KV):
# vLLM reads it as the quantization config when config.json has none.
from pdctl.models.quantization import QUANT_FILE

UNKNOWN = "w0"
# The messages' contents in turn: chat requests work (verify sends one), no special tokens.
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }} {% endfor %}"


def word(token_id: int) -> str:
    return f"w{token_id}"


def tokenizer(vocab_size: int) -> dict[str, object]:
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "WhitespaceSplit"},
        "post_processor": None,
        "decoder": None,
        "model": {
            "type": "WordLevel",
            "vocab": {word(i): i for i in range(vocab_size)},
            "unk_token": UNKNOWN,
        },
    }


def make(config: Path, out: Path) -> Path:
    """`out` holding config.json (copied from `config`), the hf_quant_config.json beside it when
    there is one, and the tokenizer files."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(config, out / "config.json")
    quant = config.parent / QUANT_FILE
    if quant.is_file():
        shutil.copyfile(quant, out / QUANT_FILE)
    vocab_size = int(json.loads(config.read_text())["vocab_size"])
    (out / "tokenizer.json").write_text(json.dumps(tokenizer(vocab_size)))
    settings = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": UNKNOWN,
        "chat_template": CHAT_TEMPLATE,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(settings))
    return out


def prompt(rng: random.Random, length: int, vocab_size: int) -> str:
    """`length` random words, each one token; random so that prefix caching cannot hide prefill."""
    return " ".join(word(rng.randrange(1, vocab_size)) for _ in range(length))
