"""A method a path does not have is a 405 whose `Allow` names every method the path has — not
only those of the first route that matched the path (`Allow: PUT` on a PUT, GET and DELETE path
told a client the other two did not exist)."""

from __future__ import annotations

import re
from typing import Any

from tests.control_plane.conftest import Api

SOME_ID = "4b1c9a6e-0000-4000-8000-000000000001"
IMPLICIT = {"HEAD", "OPTIONS"}
UNUSED = ("PATCH", "PUT", "POST", "DELETE", "GET")


def _paths(api: Api) -> dict[str, Any]:
    with api.client() as client:
        paths: dict[str, Any] = client.get("/openapi.json").json()["paths"]
    return paths


def test_every_path_answers_an_unknown_method_with_all_its_methods(api: Api) -> None:
    wrong = []
    with api.client() as client:
        for path, item in _paths(api).items():
            declared = {method.upper() for method in item}
            method = next(candidate for candidate in UNUSED if candidate not in declared)
            response = client.request(method, re.sub(r"\{[^}]+\}", SOME_ID, path))
            allowed = {part.strip() for part in response.headers.get("allow", "").split(",")}
            if response.status_code != 405 or allowed - IMPLICIT != declared:
                wrong.append(f"{method} {path}: {response.status_code}, Allow: {allowed}")
    assert wrong == []


def test_the_webhook_lists_put_get_and_delete(api: Api) -> None:
    with api.client() as client:
        response = client.patch("/v1/webhook", json={})
    assert response.status_code == 405
    allowed = {part.strip() for part in response.headers["allow"].split(",")}
    assert allowed - IMPLICIT == {"GET", "PUT", "DELETE"}
