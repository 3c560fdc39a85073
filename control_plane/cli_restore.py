"""`nachtwacht control after-restore`: run once after restoring the database from a backup.

Every token outstanding in the restored database is revoked (reason `restore`), so no agent
switches on a grant the database may have forgotten or remembers wrongly, and the answers'
change feed is emptied (its rows name the old server's transactions). Run it before the replicas
serve agents again; running it twice does no harm. On the trail as `platform.restored`. While
sessions of `nachtwacht control serve` are connected to the database it refuses and changes
nothing (the database is live, not restored), unless `--even-with-replicas-connected` is given.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from control_plane.cli_common import add_admin_flags, admin_pool, cli_actor, emit
from control_plane.restore import OVERRIDE_FLAG, after_restore
from ground.clock import clock_from_env
from ground.contract import format_instant

__all__ = ["RESTORE_COMMANDS", "add_restore_commands"]


def add_restore_commands(commands: Any) -> None:
    restored = commands.add_parser(
        "after-restore",
        help="after restoring the database: revoke every outstanding token, reset the change feed",
    )
    restored.add_argument(
        OVERRIDE_FLAG,
        action="store_true",
        help="run even while sessions of `nachtwacht control serve` are connected to the database"
        " (refused otherwise: a database replicas serve from is live, not restored)",
    )
    add_admin_flags(restored)


def _after_restore(args: argparse.Namespace) -> int:
    now = clock_from_env().now()
    with admin_pool(args, finishing_restore=True) as pool:
        done = after_restore(
            pool,
            now=now,
            actor=cli_actor(),
            even_with_replicas_connected=args.even_with_replicas_connected,
        )
    emit(
        args,
        {
            "tokens_revoked": done.tokens_revoked,
            "feed_rows_cleared": done.feed_rows_cleared,
            "at": format_instant(done.at),
        },
        [
            f"revoked {done.tokens_revoked} outstanding token(s) at {format_instant(done.at)};"
            " agents holding one are refused their download and their switch",
            f"cleared {done.feed_rows_cleared} row(s) of the answers' change feed",
            "start the replicas now; the next slots are claimed as usual",
        ],
    )
    return 0


RESTORE_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "after-restore": _after_restore,
}
