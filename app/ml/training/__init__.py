"""LoRA fine-tuning: `trainer.ModelTrainer` and the modules it is made of.

Import from the modules themselves: `metrics` and `adapter_files` load without torch, so the
API process can read them before (or without) loading it.
"""
