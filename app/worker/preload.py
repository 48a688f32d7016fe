"""What the fork server (local.py) imports once, so that no training child imports it again:
torch, peft, and transformers' auto classes, fast tokenizers and the built-in model's
architecture (about 4 s of a core a job on 2 cores). Imports only: nothing here starts a
thread or touches a device, which keeps forking from it safe."""

import peft  # noqa: F401
import transformers.models.qwen2.modeling_qwen2  # noqa: F401
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast  # noqa: F401

import app.ml.training.trainer  # noqa: F401
import app.ml.varlen_attention  # noqa: F401
import app.worker.child  # noqa: F401
