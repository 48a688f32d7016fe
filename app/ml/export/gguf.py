"""GGUF for llama.cpp, LM Studio and Ollama: the merged model as one file, the adapter as a
GGUF LoRA for a base GGUF, and an Ollama Modelfile, converted by llama.cpp's own scripts
(llama_cpp.py). Tokenizer, chat template and stop tokens travel in the GGUF's metadata.
"""

import tempfile
from pathlib import Path

from app.core.language import said
from app.ml.export import GgufType, Progress
from app.ml.export.llama_cpp import ConversionFailed, run_converter
from app.ml.export.merged import dequantized_note, export_merged
from app.ml.export.ollama import modelfile
from app.ml.models import load_tokenizer
from app.ml.training.adapter_files import read_adapter_metadata

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
        progress(0.45, said("converting the merged model to GGUF ({outtype})", outtype=outtype))
        _convert_model(converter, merged, target / f"model-{outtype}.gguf", outtype)
    progress(0.75, said("converting the adapter to a GGUF LoRA"))
    _convert(
        converter,
        "convert_lora_to_gguf.py",
        [str(adapter_dir), "--base", str(base_dir)],
        target / f"adapter-{outtype}.gguf",
        outtype,
    )
    if with_base:
        progress(0.85, said("converting the base model to GGUF"))
        _convert_model(converter, base_dir, target / f"base-{outtype}.gguf", outtype)
    progress(0.95, said("writing the Modelfile"))
    tokenizer = load_tokenizer(base_dir)
    (target / "Modelfile").write_text(
        modelfile(f"model-{outtype}.gguf", tokenizer, system_prompt=metadata.system_prompt)
    )
    (target / "README.md").write_text(
        gguf_card(target.name, outtype, with_base=with_base, system=metadata.system_prompt)
        + dequantized_note(metadata.quantization)
    )


def _convert_model(converter: Path, model_dir: Path, out: Path, outtype: GgufType) -> None:
    _convert(converter, "convert_hf_to_gguf.py", [str(model_dir)], out, outtype)


def _convert(converter: Path, script: str, args: list[str], out: Path, outtype: str) -> None:
    try:
        run_converter(
            converter,
            script,
            [*args, "--outfile", str(out), "--outtype", outtype],
            timeout=_CONVERT_TIMEOUT_S,
        )
    except ConversionFailed as exc:
        raise GgufUnsupported(f"llama.cpp's {script} refused this model: {exc}") from exc


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
