"""The OpenAPI document says what the API really answers, errors included.

FastAPI documents a 422 as `{"detail": [...]}` and no other error; qatune answers every
error as `{"detail": "...", "errors": [...]}` (and the OpenAI shape under /v1). Here every
operation gets the errors it can give: 401 behind authentication, 404 for a path with an
id, 413 and 422 for a body, 422 for parameters, 503 for a write that waits out a busy
database, 507 for a write on a full disk, and what a route declares itself with
`errors(...)`. Operations that give out an id link to the operations that take it.
"""

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, Field

from app.api.errors import OPENAI_PREFIX

DESCRIPTIONS = {
    400: "The request cannot be carried out as sent",
    401: "Not signed in, or the token or API key is invalid",
    403: "Signed in, but not allowed to do this",
    404: "Not found, or not yours",
    408: "The client went away, or sent its request too slowly",
    409: "Conflicts with the current state (a job's status, this machine's capacity)",
    413: "The body is over the size limit",
    422: "The request is invalid; `errors` names each field, line or item",
    429: "Too many requests; see Retry-After",
    503: "Busy (the database or the model); nothing was saved, try again",
    507: "The disk holding the service's data is full; nothing was saved",
}
# Where each path id comes from: (method, path, success status, where the id is in its
# body). As OpenAPI links they let a client, or a fuzzer's stateful phase, chain create,
# use, delete and use again with real ids.
ID_SOURCES: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "job_id": (("post", "/jobs", "201", "/id"), ("get", "/jobs", "200", "/items/0/id")),
    "dataset_id": (("post", "/datasets", "201", "/id"), ("get", "/datasets", "200", "/0/id")),
    "key_id": (("post", "/api-keys", "201", "/id"), ("get", "/api-keys", "200", "/0/id")),
    "file_id": (("post", "/v1/files", "200", "/id"), ("get", "/v1/files", "200", "/data/0/id")),
    "job_name": (
        ("post", "/v1/fine_tuning/jobs", "200", "/id"),
        ("get", "/v1/fine_tuning/jobs", "200", "/data/0/id"),
    ),
    "eval_id": (("post", "/v1/evals", "200", "/id"), ("get", "/v1/evals", "200", "/data/0/id")),
    "run_id": (
        ("post", "/v1/evals/{eval_id}/runs", "200", "/id"),
        ("get", "/v1/evals/{eval_id}/runs", "200", "/data/0/id"),
    ),
    "item_id": (("get", "/v1/evals/{eval_id}/runs/{run_id}/output_items", "200", "/data/0/id"),),
    "model": (
        ("get", "/jobs/{job_id}", "200", "/fine_tuned_model"),
        ("get", "/v1/fine_tuning/jobs/{job_name}", "200", "/fine_tuned_model"),
        ("get", "/v1/models", "200", "/data/0/id"),
    ),
}


class ErrorItem(BaseModel):
    field: str | None = None
    line: int | None = None
    item: int | None = None
    message: str


class ErrorOut(BaseModel):
    detail: str = Field(description="what went wrong and what to do")
    errors: list[ErrorItem] = Field(default_factory=list)


class OpenAIErrorBody(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIError(BaseModel):
    error: OpenAIErrorBody


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: the error statuses it can give beyond the common ones."""
    return {code: {"description": DESCRIPTIONS[code]} for code in codes}


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
            tags=app.openapi_tags,
        )
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in (ErrorItem, ErrorOut, OpenAIErrorBody, OpenAIError):
            json_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(json_schema.pop("$defs", {}))
            schemas[model.__name__] = json_schema
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        for path, operations in schema.get("paths", {}).items():
            for method, operation in operations.items():
                _document_errors(path, method, operation)
        _link_ids(schema["paths"])
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _document_errors(path: str, method: str, operation: dict[str, Any]) -> None:
    responses: dict[str, Any] = operation.setdefault("responses", {})
    codes = {int(code) for code in responses if code.isdigit() and int(code) >= 400}
    parameters = operation.get("parameters", [])
    if operation.get("security") or path.startswith(OPENAI_PREFIX):
        codes.add(401)
    if parameters or "requestBody" in operation:
        codes.add(422)
    if "requestBody" in operation:
        codes.update((400, 413))  # 400: not JSON, not UTF-8, or broken multipart
    if any(p.get("in") == "path" for p in parameters):
        codes.add(404)
    if method in ("post", "put", "patch", "delete"):
        codes.update((503, 507))
    error_schema = "OpenAIError" if path.startswith(OPENAI_PREFIX) else "ErrorOut"
    for code in sorted(codes):
        entry = responses.setdefault(str(code), {})
        entry["description"] = entry.get("description") or DESCRIPTIONS.get(code, "Error")
        if code == 422 and entry["description"] == "Validation Error":
            entry["description"] = DESCRIPTIONS[422]
        entry["content"] = {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{error_schema}"}}
        }


def _link_ids(paths: dict[str, dict[str, Any]]) -> None:
    for parameter, sources in ID_SOURCES.items():
        consumers = [
            (path, method, operation)
            for path, operations in paths.items()
            if f"{{{parameter}}}" in path
            for method, operation in operations.items()
        ]
        for method, path, status, pointer in sources:
            links = paths[path][method]["responses"][status].setdefault("links", {})
            for consumer_path, consumer_method, consumer in consumers:
                links[consumer["operationId"]] = {
                    "operationId": consumer["operationId"],
                    "parameters": {parameter: f"$response.body#{pointer}"},
                    "description": f"{consumer_method.upper()} {consumer_path} with this "
                    f"{parameter}",
                }
