"""A job's model graded on a held-out file, natively (POST /jobs/{id}/evals, the job page):
an eval of /v1/evals with ready-made criteria, and a run for the model and its base."""

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.core.storage import Storage
from app.db.models import Eval, EvalRun, User
from app.graders.evals import (
    CompletionsSource,
    Criterion,
    CustomDataSourceConfig,
    FileContent,
    ItemReference,
    Row,
    RunSampling,
)
from app.graders.spec import StringCheck, TextSimilarity
from app.services.datasets import files as datasets_service
from app.services.evals.graders import Graders
from app.services.evals.lifecycle import MAX_ROWS, create_eval, create_run

ANSWERED, EXPECTED = "{{ sample.output_text }}", "{{ item.answer }}"
JOB_CRITERIA: dict[str, Criterion] = {
    "exact": StringCheck(
        type="string_check", name="exact", input=ANSWERED, reference=EXPECTED, operation="eq"
    ),
    "contains": StringCheck(
        type="string_check", name="contains", input=ANSWERED, reference=EXPECTED, operation="ilike"
    ),
    "similar": TextSimilarity(
        type="text_similarity",
        name="similar",
        input=ANSWERED,
        reference=EXPECTED,
        evaluation_metric="rouge_l",
        pass_threshold=0.6,
    ),
}
JOB_ITEM_SCHEMA = {
    "type": "object",
    "properties": {
        "question": {"type": "string"},
        "answer": {"type": "string"},
        "messages": {"type": "array"},
    },
    "required": ["question", "answer", "messages"],
}


def evaluate_job(
    session: Session,
    *,
    user: User,
    storage: Storage,
    graders: Graders,
    serving_resolve: Any,
    job_model: str,
    base_model: str | None,
    dataset_id: int,
    criteria: Sequence[Criterion],
    max_tokens: int,
) -> tuple[Eval, list[EvalRun]]:
    """An eval of a job's model on one of the user's files (each pair's conversation up to
    its answer, graded against the answer), and a run for the model and, if given, its base,
    both greedy with the model's answer budget (so the base's answers stop at about its
    length, as in the job's answer table)."""
    dataset = datasets_service.get_dataset(session, user=user, dataset_id=dataset_id)
    pairs = datasets_service.read_pairs(storage, dataset)[:MAX_ROWS]
    rows = [
        Row(item={"question": p.question, "answer": p.answer, "messages": p.prompt_messages()})
        for p in pairs
    ]
    evaluation = create_eval(
        session,
        user=user,
        graders=graders,
        name=f"{job_model} on {dataset.name}"[:200],
        config=CustomDataSourceConfig(
            type="custom", item_schema=JOB_ITEM_SCHEMA, include_sample_schema=True
        ),
        criteria=criteria,
        labels=None,
    )
    runs = []
    for model in [job_model, base_model] if base_model else [job_model]:
        source = CompletionsSource(
            type="completions",
            model=model,
            source=FileContent(type="file_content", content=rows),
            input_messages=ItemReference(type="item_reference", item_reference="item.messages"),
            sampling_params=RunSampling(temperature=0, max_completion_tokens=max_tokens),
        )
        runs.append(
            create_run(
                session,
                user=user,
                storage=storage,
                graders=graders,
                evaluation=evaluation,
                name=model,
                data_source=source,
                labels=None,
                serving_resolve=serving_resolve,
            )
        )
    return evaluation, runs
