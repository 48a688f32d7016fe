"""Domain errors, raised where a problem is found and mapped to HTTP in one place (main.py)."""

from typing import Any

from app.core.language import Sentence, deferred, verbatim

# PostgreSQL's text holds no NUL: refused on every database (app/db/session.py) and in a
# job's labels, which the database reads back as text (app/schemas/common.py).
NUL_REFUSED = deferred(
    "Text with a NUL character (\\u0000) is not accepted; remove it and send again"
)


class QatuneError(Exception):
    """Base of every error a user can act on. `message` says what to do next, in the
    language of the request being answered; `sentence`, for whoever reads it later."""

    status_code = 400

    def __init__(
        self, message: str | Sentence, *, details: list[dict[str, Any]] | None = None
    ) -> None:
        self.sentence = message if isinstance(message, Sentence) else verbatim(message)
        self.message = self.sentence.text()
        super().__init__(self.message)
        self.details = details or []


class BadRequest(QatuneError):
    """A request that cannot be carried out as sent; `param` names the field at fault."""

    status_code = 400

    def __init__(
        self,
        message: str | Sentence,
        *,
        param: str | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message, details=details)
        self.param = param


class NotFoundError(QatuneError):
    status_code = 404


class ConflictError(QatuneError):
    status_code = 409


class ValidationFailed(QatuneError):
    status_code = 422


class DataMismatch(ConflictError):
    """A well-formed request that its data cannot serve: a method the records are not for,
    a setting of the other method (a 409: the body alone was valid)."""


class NotPossibleHere(QatuneError):
    """A well-formed request that this machine cannot carry out (memory, precision)."""

    status_code = 409


class PayloadTooLarge(QatuneError):
    status_code = 413


class AuthError(QatuneError):
    status_code = 401


class ForbiddenError(QatuneError):
    status_code = 403


class TooManyRequests(QatuneError):
    """A limit was reached; `retry_after` says in how many seconds to try again."""

    status_code = 429

    def __init__(
        self,
        message: str | Sentence,
        *,
        retry_after: int,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, details=details)
        self.retry_after = retry_after
        self.headers = headers or {}  # what the client needs to try again (a challenge)


class ConfigurationError(QatuneError):
    """Settings that cannot work on this machine; raised at start, not at the first job."""

    status_code = 500
