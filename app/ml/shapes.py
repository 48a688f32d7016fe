"""The shape of a decoder-only model (what memory planning needs), and the shapes of the
common open model families, so that estimates work offline without a download.

The catalog's figures are those of each model's published config.json; a test checks that
the parameter counts they give match the sizes the models are known by.
"""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ModelShape:
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    vocab_size: int
    tie_embeddings: bool = True
    max_positions: int = 32768
    attention_head_dim: int | None = None  # None: hidden_size / num_heads (Qwen3, Gemma differ)

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "ModelShape":
        config = config.get("text_config") or config  # a multimodal model's language part
        heads = int(config.get("num_attention_heads", 1))
        return cls(
            attention_head_dim=int(config["head_dim"]) if config.get("head_dim") else None,
            max_positions=int(config.get("max_position_embeddings", 2048)),
            hidden_size=int(config["hidden_size"]),
            intermediate_size=int(config.get("intermediate_size", 4 * config["hidden_size"])),
            num_layers=int(config["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(config.get("num_key_value_heads") or heads),
            vocab_size=int(config["vocab_size"]),
            tie_embeddings=bool(config.get("tie_word_embeddings", False)),
        )

    @property
    def head_dim(self) -> int:
        return self.attention_head_dim or self.hidden_size // self.num_heads

    def linear_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of every linear layer in one decoder block: q, k, v, o, gate, up, down."""
        h, i = self.hidden_size, self.intermediate_size
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        return [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)]

    @property
    def num_params(self) -> int:
        return self.linear_params + self.other_params

    @property
    def linear_params(self) -> int:
        """The decoder blocks' linear layers: what a quantized base stores in 8 or 4 bits."""
        return self.num_layers * sum(a * b for a, b in self.linear_shapes())

    @property
    def other_params(self) -> int:
        """Embeddings, LM head and norms: kept in the training precision when quantized."""
        embeddings = self.vocab_size * self.hidden_size * (1 if self.tie_embeddings else 2)
        return self.num_layers * 2 * self.hidden_size + embeddings

    @property
    def largest_linear(self) -> int:
        return max(a * b for a, b in self.linear_shapes())

    def lora_params(self, r: int) -> int:
        return self.num_layers * sum(r * (a + b) for a, b in self.linear_shapes())


def _qwen25(h: int, i: int, layers: int, heads: int, kv: int, big: bool) -> ModelShape:
    # 7B and up have a 152,064-token vocabulary and a separate LM head
    return ModelShape(h, i, layers, heads, kv, 152064 if big else 151936, not big, 32768)


def _qwen3(h: int, i: int, layers: int, heads: int, tie: bool) -> ModelShape:
    return ModelShape(h, i, layers, heads, 8, 151936, tie, 40960, 128)


def _llama3(h: int, i: int, layers: int, heads: int, tie: bool, positions: int) -> ModelShape:
    return ModelShape(h, i, layers, heads, 8, 128256, tie, positions)


# name → shape; an -Instruct (or -it) name's base model has the same shape (added below)
KNOWN_SHAPES: dict[str, ModelShape] = {
    "Qwen/Qwen2.5-0.5B-Instruct": _qwen25(896, 4864, 24, 14, 2, False),
    "Qwen/Qwen2.5-1.5B-Instruct": _qwen25(1536, 8960, 28, 12, 2, False),
    "Qwen/Qwen2.5-3B-Instruct": _qwen25(2048, 11008, 36, 16, 2, False),
    "Qwen/Qwen2.5-7B-Instruct": _qwen25(3584, 18944, 28, 28, 4, True),
    "Qwen/Qwen2.5-14B-Instruct": _qwen25(5120, 13824, 48, 40, 8, True),
    "Qwen/Qwen2.5-32B-Instruct": _qwen25(5120, 27648, 64, 40, 8, True),
    "Qwen/Qwen2.5-72B-Instruct": _qwen25(8192, 29568, 80, 64, 8, True),
    "Qwen/Qwen3-0.6B": _qwen3(1024, 3072, 28, 16, True),
    "Qwen/Qwen3-1.7B": _qwen3(2048, 6144, 28, 16, True),
    "Qwen/Qwen3-4B": _qwen3(2560, 9728, 36, 32, True),
    "Qwen/Qwen3-8B": _qwen3(4096, 12288, 36, 32, False),
    "Qwen/Qwen3-14B": _qwen3(5120, 17408, 40, 40, False),
    "Qwen/Qwen3-32B": _qwen3(5120, 25600, 64, 64, False),
    "meta-llama/Llama-3.2-1B-Instruct": _llama3(2048, 8192, 16, 32, True, 131072),
    "meta-llama/Llama-3.2-3B-Instruct": _llama3(3072, 8192, 28, 24, True, 131072),
    "meta-llama/Meta-Llama-3-8B-Instruct": _llama3(4096, 14336, 32, 32, False, 8192),
    "meta-llama/Llama-3.1-8B-Instruct": _llama3(4096, 14336, 32, 32, False, 131072),
    "meta-llama/Meta-Llama-3-70B-Instruct": _llama3(8192, 28672, 80, 64, False, 8192),
    "meta-llama/Llama-3.1-70B-Instruct": _llama3(8192, 28672, 80, 64, False, 131072),
    "meta-llama/Llama-3.3-70B-Instruct": _llama3(8192, 28672, 80, 64, False, 131072),
    "mistralai/Mistral-7B-Instruct-v0.3": ModelShape(4096, 14336, 32, 32, 8, 32768, False, 32768),
    "google/gemma-2-2b-it": ModelShape(2304, 9216, 26, 8, 4, 256000, True, 8192, 256),
    "google/gemma-2-9b-it": ModelShape(3584, 14336, 42, 16, 8, 256000, True, 8192, 256),
    "google/gemma-2-27b-it": ModelShape(4608, 36864, 46, 32, 16, 256000, True, 8192, 128),
    "google/gemma-3-1b-it": ModelShape(1152, 6912, 26, 4, 1, 262144, True, 32768, 256),
    "google/gemma-3-4b-it": ModelShape(2560, 10240, 34, 8, 4, 262208, True, 131072, 256),
    "google/gemma-3-12b-it": ModelShape(3840, 15360, 48, 16, 8, 262208, True, 131072, 256),
    "google/gemma-3-27b-it": ModelShape(5376, 21504, 62, 32, 16, 262208, True, 131072, 128),
    "microsoft/Phi-3-mini-4k-instruct": ModelShape(3072, 8192, 32, 32, 32, 32064, False, 4096),
    "microsoft/Phi-3.5-mini-instruct": ModelShape(3072, 8192, 32, 32, 32, 32064, False, 131072),
    "microsoft/Phi-3-medium-4k-instruct": ModelShape(5120, 17920, 40, 40, 10, 32064, False, 4096),
    "microsoft/Phi-4-mini-instruct": ModelShape(3072, 8192, 32, 24, 8, 200064, True, 131072),
    "microsoft/phi-4": ModelShape(5120, 17920, 40, 40, 10, 100352, False, 16384),
}
for _name in list(KNOWN_SHAPES):
    for _suffix in ("-Instruct", "-it"):
        if _name.endswith(_suffix):
            KNOWN_SHAPES.setdefault(_name.removesuffix(_suffix), KNOWN_SHAPES[_name])
    if _name.startswith("Qwen/Qwen3-"):  # the Base checkpoints share the shape
        KNOWN_SHAPES.setdefault(f"{_name}-Base", KNOWN_SHAPES[_name])
