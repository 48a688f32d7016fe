"""What the fork server (local.py) imports once, so that no training child imports it again:
torch, peft, and transformers' auto classes, fast tokenizers and the built-in model's
architecture (8-10 s of a core on a 2-core CPU, bitsandbytes' torch.compile wrappers and
transformers' scan of its model packages included). Imports only: nothing here starts a
thread or touches a device, which keeps forking from it safe. They load with the collector
paused and stay frozen, so no child's collections walk them."""

from app.core.loading import collector_paused

with collector_paused():
    import peft  # noqa: F401
    import transformers.models.qwen2.modeling_qwen2  # noqa: F401
    from transformers import (  # noqa: F401
        AutoModelForCausalLM,
        AutoTokenizer,
        PreTrainedTokenizerFast,
    )

    import app.ml.training.trainer  # noqa: F401
    import app.ml.varlen_attention  # noqa: F401
    import app.worker.child  # noqa: F401
