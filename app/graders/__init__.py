"""OpenAI's graders, taken as OpenAI writes them: one module a grader type, one `grade`.

Graders are shared by the grader endpoints (/v1/fine_tuning/alpha/graders), evals and
reinforcement fine-tuning. What a grader needs from the rest of qatune (a model to judge
with, a sandbox for user code) comes in as `Tools`, so this package imports no service.
"""
