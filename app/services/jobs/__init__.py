"""Fine-tuning jobs: their requests, plans, runs, events and trained models."""
