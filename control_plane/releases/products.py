"""The two product lines: the managed agent (`agent`) and nachtwacht's own agent (`updater`).

Each (product, channel, platform) is a pair of its own: its releases are newer than its own
newest, start in their own waves, and its current release has its own table (`current_releases`
for the agent, whose shape the previous release still writes; `current_updater_releases` for the
updater). Halts, the release brake and withdrawal act on one release, so on one product.
"""

from __future__ import annotations

from typing import Final

from control_plane.errors import InvalidInput
from ground.limits import PRODUCTS, Product

__all__ = ["CURRENT_TABLE", "PRODUCTS", "Product", "product_of"]

# Constants only: the name is put into SQL.
CURRENT_TABLE: Final[dict[Product, str]] = {
    "agent": "current_releases",
    "updater": "current_updater_releases",
}


def product_of(value: object, *, field: str = "product") -> Product:
    """A product named by a caller, or InvalidInput naming the field and value."""
    if value == "agent":
        return "agent"
    if value == "updater":
        return "updater"
    raise InvalidInput(field, value, "is not a product (expected 'agent' or 'updater')")
