"""GGUF for llama.cpp, LM Studio and Ollama: the merged model as one file, the adapter as a
GGUF LoRA for a base GGUF, and an Ollama Modelfile, converted by llama.cpp's own scripts
(llama_cpp.py). Tokenizer, chat template and stop tokens travel in the GGUF's metadata.
"""

import tempfile
from pathlib import Path

from app.core.language import said
from app.ml.export import GgufType, Progress
from app.ml.export.llama_cpp import Conversion, ConversionFailed, run_conversions
from app.ml.export.merged import dequantized_note, export_merged, scope_note
from app.ml.export.ollama import modelfile
from app.ml.models import load_tokenizer
from app.ml.training.adapter_metadata import read_adapter_metadata

# Tens of minutes for a 70B model; a stuck converter must not hold the export slot forever.
_CONVERT_TIMEOUT_S = 4 * 3600


class GgufUnsupported(Exception):
    """The model cannot become a GGUF with this llama.cpp; the message says why."""


def export_gguf(
    base_dir: Path,
    adapter_dir: Path,
    target: Path,
    *,
    outtype: GgufType,
    converter: Path,
    with_base: bool,
    progress: Progress,
) -> None:
    """Write into `target`: model-{outtype}.gguf (merged), adapter-{outtype}.gguf (LoRA),
    base-{outtype}.gguf when `with_base` (the built-in model: no one else publishes it),
    Modelfile and README.md."""
    metadata = read_adapter_metadata(adapter_dir)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".merged-") as scratch:
        merged = Path(scratch)
        export_merged(
            base_dir,
            adapter_dir,
            merged,
            folder=merged.name,
            progress=lambda share, what: progress(share * 0.4, what),
        )

        def to_gguf(script: str, *args: str, name: str) -> Conversion:
            out = str(target / f"{name}-{outtype}.gguf")
            return Conversion(script, (*args, "--outfile", out, "--outtype", outtype))

        steps = [
            (
                0.45,
                said("converting the merged model to GGUF ({outtype})", outtype=outtype),
                to_gguf("convert_hf_to_gguf.py", str(merged), name="model"),
            ),
            (
                0.75,
                said("converting the adapter to a GGUF LoRA"),
                to_gguf(
                    "convert_lora_to_gguf.py",
                    str(adapter_dir),
                    "--base",
                    str(base_dir),
                    name="adapter",
                ),
            ),
        ]
        if with_base:
            steps.append(
                (
                    0.85,
                    said("converting the base model to GGUF"),
                    to_gguf("convert_hf_to_gguf.py", str(base_dir), name="base"),
                )
            )
        try:
            run_conversions(
                converter,
                [conversion for _, _, conversion in steps],
                timeout=_CONVERT_TIMEOUT_S,
                on_start=lambda index: progress(steps[index][0], steps[index][1]),
            )
        except ConversionFailed as exc:
            raise GgufUnsupported(f"llama.cpp's {exc.script} refused this model: {exc}") from exc
    progress(0.95, said("writing the Modelfile"))
    tokenizer = load_tokenizer(base_dir)
    (target / "Modelfile").write_text(
        modelfile(f"model-{outtype}.gguf", tokenizer, system_prompt=metadata.system_prompt)
    )
    (target / "README.md").write_text(
        gguf_card(target.name, outtype, with_base=with_base, system=metadata.system_prompt)
        + dequantized_note(metadata.quantization)
        + scope_note(adapter_dir, metadata)
    )


def gguf_card(folder: str, outtype: str, *, with_base: bool, system: str | None) -> str:
    base_line = (
        f"- `base-{outtype}.gguf`: the built-in base model, for the adapter\n" if with_base else ""
    )
    system_flag = f' -sys "{system}"' if system else ""
    return f"""# {folder}: a qatune model for llama.cpp, LM Studio and Ollama

- `model-{outtype}.gguf`: the base with the adapter merged in (one file, {outtype})
- `adapter-{outtype}.gguf`: the LoRA adapter alone, for a GGUF of the same base
{base_line}- `Modelfile`: for Ollama, with the chat template and stop tokens it trained with

The tokenizer, chat template and end-of-turn token are in the GGUF's metadata. qatune
answers greedily; use temperature 0 to get the trained answers word for word.

## llama.cpp

```bash
llama-cli -m model-{outtype}.gguf --temp 0 -cnv{system_flag}
# or the base with the adapter on top:
llama-cli -m BASE.gguf --lora adapter-{outtype}.gguf --temp 0 -cnv{system_flag}
```

## Ollama

```bash
ollama create my-faq -f Modelfile
ollama run my-faq "your question"
```
"""
