"""/api-keys: a user's keys for scripts and the OpenAI client: make, list, revoke."""

from fastapi import APIRouter, status

from app.api.deps import CurrentUser, ResourceId, SessionDep
from app.db.models import ApiKey
from app.schemas.api_keys import ApiKeyCreate, ApiKeyCreated, ApiKeyOut
from app.services.accounts import api_keys as api_keys_service

router = APIRouter(prefix="/api-keys", tags=["api keys"])


def to_out(key: ApiKey) -> ApiKeyOut:
    return ApiKeyOut.model_validate(key, from_attributes=True)


@router.post("", status_code=status.HTTP_201_CREATED)
def create_key(body: ApiKeyCreate, user: CurrentUser, session: SessionDep) -> ApiKeyCreated:
    """A new key; its secret is in this response only (only a hash of it is kept)."""
    key, made = api_keys_service.create_key(session, user=user, name=body.name)
    return ApiKeyCreated(**to_out(key).model_dump(), key=made.secret)


@router.get("")
def list_keys(user: CurrentUser, session: SessionDep) -> list[ApiKeyOut]:
    """Your keys that are not revoked, with when each was last used."""
    return [to_out(k) for k in api_keys_service.list_keys(session, user=user)]


@router.delete("/{key_id:int}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_key(key_id: ResourceId, user: CurrentUser, session: SessionDep) -> None:
    """Revoke a key: requests with it are refused from now on."""
    api_keys_service.revoke_key(session, user=user, key_id=key_id)
