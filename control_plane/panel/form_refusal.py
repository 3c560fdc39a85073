"""The page a panel form gets when a field breaks the bound its route declares (a reason over
2,000 characters, an address over 2,100, a label over 300): the route never runs, nothing is
changed, and the reader is told in their language which field, what they sent (shortened; never a
secret) and what is expected, with a link back to the form — not the API's JSON.

A field a form's body gives twice with two values, or a parameter its address so gives, is
refused here before any route runs (`one_value_per_field`, by `given_twice`, the rule the agent
list's and the history's views use for their own parameters).

One place for every form: the API's answer to a request that fails validation
(`control_plane.api.app`) hands the paths under /panel/ here. So does the door's size limit
(`control_plane.api.limits`): a form whose whole body is over it (a pasted 100 kB password) gets
`form_too_large`, the panel's page that says so and names the limit; and an address with a NUL
in it gets `address_refused`, which names the parameter (or the path) and shows the value.

What the router answers under /panel/ comes here too (`address_unserved`): a path nothing serves
is "not found"; a form's address opened as a page leads to the form's page. And an unexpected
exception (`failure_page`): the panel's 500 page, with the reference the log line carries.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from functools import cache
from typing import Annotated, Any, get_args, get_origin, get_type_hints
from urllib.parse import parse_qsl, urlsplit

from babel import units
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.types import Scope

from control_plane.errors import NotFound, RequestRefused
from control_plane.panel.i18n import Language
from control_plane.panel.readers import sign_in_again
from control_plane.panel.web import (
    PREFIX,
    context_of,
    form_page,
    not_found,
    page,
    redirect,
    safe_next,
    unsigned_context,
)
from ground.contract.plain_text import first_bidi_control, first_control_character, shown

__all__ = [
    "address_refused",
    "address_unserved",
    "field_problem",
    "form_refused",
    "form_too_large",
    "given_twice",
    "is_panel_path",
    "not_an_address",
    "not_plain",
    "not_sent_by_form",
    "not_text",
    "not_whole_in_range",
    "one_value_per_field",
    "service_refused",
    "too_long",
    "two_values",
]

# Fields whose value is never shown back: keys, passwords, secrets.
SECRET_FIELDS = frozenset({"key", "password", "repeated", "secret", "client_secret"})
# A value is quoted up to this many characters.
SHOWN_CHARACTERS = 40
# A body can break a rule in many places; the first few name the problem.
MAX_PROBLEMS_SHOWN = 5
# The forms sent before signing in, by their path under the panel's prefix; every other form
# needs a session.
OPEN_FORMS = frozenset({"/sign-in", "/sign-in/person", "/sign-in/code"})
OPEN_FORM_FOLDERS = ("/invitation/", "/reset/")
# The kind of problem `one_value_per_field` reports, the field's two values its input.
TWO_VALUES = "two_values"


def is_panel_path(path: str) -> bool:
    return path.startswith(PREFIX + "/")


def field_label(lang: Language, name: str) -> str:
    """The field's name as its form's reader knows it; a field nobody types (a hidden one, a
    button's) by the name it is sent under."""
    labels = {
        "reason": lang.gettext("Reason"),
        "url": lang.gettext("Address"),
        "secret": lang.gettext("Signing secret"),
        "name": lang.gettext("Name"),
        "label": lang.gettext("What it is for"),
        "name_pattern": lang.gettext("Agent names must match"),
        "email": lang.gettext("E-mail address"),
        "role": lang.gettext("Role"),
        "password": lang.gettext("Password"),
        "repeated": lang.gettext("The same password again"),
        "code": lang.gettext("Code"),
        "issuer": lang.gettext("Issuer URL"),
        "client_id": lang.gettext("Client id"),
        "client_secret": lang.gettext("Client secret"),
        "key": lang.gettext("Your panel key or operator key"),
        "version": lang.gettext("Version"),
        "until": lang.gettext("Hold until"),
        "timezone": lang.gettext("Time zone of every schedule"),
        "catch_up_minutes": lang.gettext("Catch-up window (minutes)"),
        "org_cap": lang.gettext("Updates per organisation per minute"),
        "global_cap": lang.gettext("Updates in total per minute"),
        "uses": lang.gettext("How many hosts may use it"),
        "hours": lang.gettext("Valid for how many hours"),
        "q": lang.gettext("Search by name"),
        "state": lang.gettext("State"),
        "sort": lang.gettext("Order"),
        "page": lang.gettext("Page"),
        "from": lang.gettext("First day"),
        "to": lang.gettext("Last day"),
    }
    return labels.get(name, name)


def _shown(text: str) -> str:
    """Typed text quoted in a message, shortened: each control character as U+FFFD, so it is
    seen, not obeyed."""
    return shown(text[:SHOWN_CHARACTERS]) + ("…" if len(text) > SHOWN_CHARACTERS else "")


def field_problem(lang: Language, error: dict[str, Any]) -> str:
    """One validation error said for a person: the field, the value and what is expected."""
    location = [str(part) for part in error.get("loc", ()) if part not in {"body", "query"}]
    name = location[0] if location else ""
    field = field_label(lang, name)
    value = error.get("input")
    kind = error.get("type")
    if kind == TWO_VALUES and isinstance(value, tuple):
        return two_values(lang, name, *value)
    if kind == "string_too_long" and isinstance(value, str):
        limit = (error.get("ctx") or {}).get("max_length", 0)
        if name in SECRET_FIELDS:
            return lang.gettext(
                "%(field)s: too long (%(length)s characters). At most %(count)s characters are"
                " accepted.",
                field=field,
                length=lang.number(len(value)),
                count=lang.number(limit),
            )
        return too_long(lang, name, value, limit)
    return not_sent_by_form(lang, name, value)


def too_long(lang: Language, name: str, value: str, limit: int) -> str:
    return lang.gettext(
        "%(field)s: “%(value)s” is too long (%(length)s characters). At most %(count)s"
        " characters are accepted.",
        field=field_label(lang, name),
        value=_shown(value),
        length=lang.number(len(value)),
        count=lang.number(limit),
    )


def not_sent_by_form(lang: Language, name: str, value: object) -> str:
    """A value the form's own controls never send (a choice that is not among its options)."""
    field = field_label(lang, name)
    if isinstance(value, str) and name not in SECRET_FIELDS:
        return lang.gettext(
            "%(field)s: “%(value)s” is not a value this form sends. Go back and use the form as"
            " the page shows it.",
            field=field,
            value=_shown(value),
        )
    return lang.gettext(
        "%(field)s: not a value this form sends. Go back and use the form as the page shows it.",
        field=field,
    )


def not_plain(lang: Language, name: str, value: str) -> str | None:
    """A typed value holding a control character or a bidirectional control, said with its field
    and value (the characters shown, not obeyed); None when it holds neither."""
    control = first_control_character(value) or first_bidi_control(value)
    if control is None:
        return None
    return lang.gettext(
        "%(field)s: “%(value)s” contains a control character (%(code)s). Write it in plain text.",
        field=field_label(lang, name),
        value=_shown(value),
        code=f"U+{ord(control):04X}",
    )


def not_whole_in_range(lang: Language, name: str, value: str, low: int, high: int) -> str:
    """A field that takes a whole number from `low` to `high`, given `value` (not one, or out of
    that range)."""
    return lang.gettext(
        "%(field)s: “%(value)s” is not accepted. Give a whole number from %(low)s to %(high)s.",
        field=field_label(lang, name),
        value=_shown(value),
        low=lang.number(low),
        high=lang.number(high),
    )


def not_text(lang: Language, name: str, value: str, limit: int) -> str:
    """A field of plain text of at most `limit` characters, given `value`, which the rules refuse
    for another reason than its length or a control character."""
    return lang.gettext(
        "%(field)s: “%(value)s” is not accepted. Write it in plain text of at most %(count)s"
        " characters.",
        field=field_label(lang, name),
        value=_shown(value),
        count=lang.number(limit),
    )


def two_values(lang: Language, name: str, first: str, other: str) -> str:
    """A field given twice with two different values (`?page=1&page=2`): serving one of them
    would be a guess. A secret's values are not shown."""
    if name in SECRET_FIELDS:
        return lang.gettext(
            "%(field)s: two values for one field. Give one.", field=field_label(lang, name)
        )
    return lang.gettext(
        "%(field)s: “%(value)s” and “%(other)s”: two values for one field. Give one.",
        field=field_label(lang, name),
        value=_shown(first),
        other=_shown(other),
    )


def given_twice(
    items: Iterable[tuple[str, object]], *, many: Collection[str] = ()
) -> dict[str, tuple[str, str]]:
    """Each field `items` gives twice with two different values, with its first value and the
    first other one; a field in `many` (one value per row: the agents ticked, a schedule's times)
    may have many. The one rule for a page's query string and a form's body alike."""
    firsts: dict[str, str] = {}
    found: dict[str, tuple[str, str]] = {}
    for name, value in items:
        if name in many or not isinstance(value, str):
            continue
        first = firsts.setdefault(name, value)
        if value != first and name not in found:
            found[name] = (first, value)
    return found


@cache
def _parameters(endpoint: Any) -> tuple[frozenset[str], frozenset[str]]:
    """The names a route's function declares, and those of them that take a list
    (`list[str] | None`)."""
    hints = get_type_hints(endpoint, include_extras=True)
    many = set()
    for name, hint in hints.items():
        if get_origin(hint) is Annotated:
            hint = get_args(hint)[0]
        if list in {get_origin(hint), *(get_origin(arg) for arg in get_args(hint))}:
            many.add(name)
    return frozenset(hints), frozenset(many)


async def one_value_per_field(request: Request) -> None:
    """Every panel route's first check (a dependency of each, `mount_panel`): a form's body that
    gives a field twice with two values, or an address that so gives a parameter its route
    declares (`?saved=1&saved=0`), is refused at that field (422, `form_refused`) before the
    route runs, instead of the last value deciding. A field the route takes a list of may come
    many times. The agent list's and the history's views read their own parameters and say
    the same at the field (`given_twice` too)."""
    route = request.scope.get("route")
    declared, many = (
        _parameters(route.endpoint) if route is not None else (frozenset(), frozenset())
    )
    query = given_twice(
        ((name, value) for name, value in request.query_params.multi_items() if name in declared),
        many=many,
    )
    body = (
        given_twice((await request.form()).multi_items(), many=many)
        if request.method == "POST"
        else {}
    )
    problems = [
        {"type": TWO_VALUES, "loc": (where, name), "input": values}
        for where, twice in (("query", query), ("body", body))
        for name, values in twice.items()
    ]
    if problems:
        raise RequestValidationError(problems)


def not_an_address(lang: Language, value: str) -> str:
    return lang.gettext(
        "%(field)s: “%(value)s” is not an e-mail address. Give one like name@example.com.",
        field=field_label(lang, "email"),
        value=_shown(value),
    )


def _back(request: Request) -> str:
    """The form's page (`form_page`), as the browser showed it when it says so (the agent list
    with its view in the query), else as its address."""
    form = form_page(request)
    referer = request.headers.get("referer", "")
    parts = urlsplit(referer)
    if referer and parts.netloc == request.url.netloc and parts.path == form:
        return safe_next(parts.path + (f"?{parts.query}" if parts.query else ""))
    return form


def _open_form(path: str) -> bool:
    """A form a reader sends before signing in (the sign-in forms, an invitation's or a password
    reset's): refused with this page like any other."""
    tail = path.removeprefix(PREFIX)
    return tail in OPEN_FORMS or tail.startswith(OPEN_FORM_FOLDERS)


def form_refused(request: Request, errors: Sequence[Any]) -> Response:
    """The page for a panel form whose fields the route's bounds refused (422). A plain `def`:
    rendering reads the session from the database. A form that needs a session, posted without
    one, is sent to sign in, as every such post is whatever its fields hold: the fields are not
    worth reading before the reader is known."""
    ctx = context_of(request)
    if ctx.session is None and request.method == "POST" and not _open_form(request.url.path):
        return sign_in_again(request)
    problems = [field_problem(ctx.lang, error) for error in errors[:MAX_PROBLEMS_SHOWN]]
    return page(ctx, "form_refused.html", status_code=422, problems=problems, back=_back(request))


def form_too_large(scope: Scope, limit: int) -> Response | None:
    """The page for a panel request whose body is over `limit` bytes (413), in the reader's
    language; None for a path outside the panel (the API answers its own JSON). Given before the
    body is read and before any route runs, so nothing was changed: the session is not looked up
    (no database), the page is the one a signed-out reader sees."""
    if not is_panel_path(scope["path"]):
        return None
    request = Request(scope)
    ctx = unsigned_context(request)
    code = ctx.lang.code
    size = units.format_unit(limit // 1024, "digital-kilobyte", length="short", locale=code)
    problem = ctx.lang.gettext(
        "The form was too large: a panel form may hold at most %(size)s (%(bytes)s bytes).",
        size=size,
        bytes=ctx.lang.number(limit),
    )
    return page(ctx, "form_too_large.html", status_code=413, problem=problem, back=_back(request))


def _nul_where(scope: Scope) -> tuple[str | None, str]:
    """The query's parameter holding a NUL and its value, else (None, the path)."""
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True):
        if "\x00" in name:
            return name, name
        if "\x00" in value:
            return name, value
    return None, str(scope["path"])


def address_refused(scope: Scope) -> Response | None:
    """The page for a panel address with a NUL character in its path or query (400), in the
    reader's language; None for an address outside the panel (the API answers its own JSON).
    Given before any route runs, like `form_too_large`: nothing was changed, the session is not
    looked up. Its language links lead to the start, not back to this address."""
    if not is_panel_path(scope["path"]):
        return None
    ctx = unsigned_context(Request(scope))
    name, value = _nul_where(scope)
    field = ctx.lang.gettext("Address") if name is None else _shown(name)
    problem = ctx.lang.gettext(
        "%(field)s: “%(value)s” holds a NUL character (U+0000, shown as �). No address of the"
        " panel holds one: open the page from the panel's menu instead.",
        field=field,
        value=_shown(value),
    )
    return page(
        ctx, "address_refused.html", status_code=400, back_here=PREFIX + "/", problem=problem
    )


def address_unserved(request: Request, status_code: int, allow: str) -> Response | None:
    """The panel's answer where the router found no route for a panel address (404) or none for
    its method (405, `allow` the methods it has); None for any other status or an address
    outside the panel. A plain `def`: the page reads the session from the database."""
    if not is_panel_path(request.url.path) or status_code not in {404, 405}:
        return None
    if status_code == 405 and request.method in {"GET", "HEAD"}:
        # A form's address opened as a page (a bookmark, a link copied from the address bar after
        # a refused form): its form's page.
        return redirect(form_page(request))
    answer = not_found(context_of(request))
    if status_code == 405:
        answer.status_code = 405
        answer.headers["allow"] = allow
    return answer


def service_refused(request: Request, exc: RequestRefused) -> Response | None:
    """The panel's page for a service's refusal that no panel route turned into its own words
    (each should): "not found", or "The form was not sent" naming the field and the value, never
    the API's JSON; None for an address outside the panel. A plain `def`, as `form_refused`."""
    if not is_panel_path(request.url.path):
        return None
    if isinstance(exc, NotFound):
        return not_found(context_of(request))
    value = exc.fields.get("value")
    problem = {
        "loc": (str(exc.fields.get("field") or ""),),
        "input": value if isinstance(value, str) else None,
        "type": "refused",
    }
    return form_refused(request, [problem])


def failure_page(scope: Scope, reference: str) -> Response | None:
    """The page for a panel request an unexpected exception ended (500), in the reader's
    language, showing nothing of the exception but `reference` (the log line with it names the
    same); None outside the panel. Like `form_too_large`, the session is not looked up: the
    fault may be the database's."""
    if not is_panel_path(scope["path"]):
        return None
    ctx = unsigned_context(Request(scope))
    return page(
        ctx, "server_error.html", status_code=500, back_here=PREFIX + "/", reference=reference
    )
