"""The tests' database fixtures, for the checks that seed a bench's world into a real database."""

from tests.conftest import (  # noqa: F401  (fixtures, found by pytest under these names)
    _database_supply,
    _migrated_template,
    database_url,
    postgres_admin_url,
)
