"""简体中文: the service's sentences (English template -> 中文), one module a part of the
service. Placeholders stay as they are; tests/core/test_language.py checks that every
template in app/ is here and that each keeps its placeholders."""

from app.core.locales.zh import models_and_jobs, openai_api, requests_and_fields, training_log

CATALOGUE: dict[str, str] = {
    **requests_and_fields.CATALOGUE,
    **models_and_jobs.CATALOGUE,
    **openai_api.CATALOGUE,
    **training_log.CATALOGUE,
}
