from sqlalchemy import create_engine

from alembic import context
from app.db import models  # noqa: F401  (registers the tables on Base.metadata)
from app.db.base import Base

config = context.config
url = config.attributes.get("connection_url")
if url is None:
    from app.core.config import get_settings

    url = get_settings().sqlalchemy_url


def run_migrations() -> None:
    engine = create_engine(url)
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies tables
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations()
