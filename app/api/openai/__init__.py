"""The OpenAI API under /v1: the official client, LangChain, Open WebUI… reach qatune here.

Each route translates OpenAI's shapes onto the same services the native API uses; errors
take OpenAI's shape (api/errors.py).
"""

from fastapi import APIRouter

from app.api.openai import completions, evals, files, fine_tuning, graders, models

router = APIRouter(prefix="/v1", tags=["OpenAI-compatible"])
router.include_router(files.router)
router.include_router(fine_tuning.router)
router.include_router(graders.router)
router.include_router(evals.router)
router.include_router(models.router)
router.include_router(completions.router)
