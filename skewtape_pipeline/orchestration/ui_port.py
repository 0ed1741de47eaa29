"""``python -m skewtape_pipeline.orchestration.ui_port PORT``: refuse a busy UI port up front.

``make ui`` runs it before starting Dagster's daemon and webserver, so a port another program
holds is named at once, with a free one to choose, instead of the webserver logging "Serving"
and then "address already in use".
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence

HOST = "127.0.0.1"
PORTS_TRIED = 50
"""How many ports above a busy one are tried for a free one to suggest."""


def port_is_free(port: int, host: str = HOST) -> bool:
    """True when a server could listen on ``host:port`` now (nothing else is bound to it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def free_port_after(port: int, host: str = HOST) -> int | None:
    """The first free port above ``port`` (within :data:`PORTS_TRIED`), or None."""
    return next(
        (p for p in range(port + 1, min(port + 1 + PORTS_TRIED, 65536)) if port_is_free(p, host)),
        None,
    )


def busy_port_message(port: int, host: str = HOST) -> str:
    """The error for a busy ``port``, naming a free one to choose with ``UI_PORT``."""
    free = free_port_after(port, host)
    choose = f"choose a free one: make ui UI_PORT={free}" if free else "choose a free UI_PORT"
    return f"error: port {port} on {host} is in use by another program; {choose}"


def main(argv: Sequence[str] | None = None) -> int:
    """0 when the port is free; 2 (and one ``error:`` line on stderr) when it is not."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not args[0].isdigit() or not 0 < int(args[0]) < 65536:
        print(f"error: UI_PORT is {' '.join(args)!r}; expected a port number", file=sys.stderr)
        return 2
    port = int(args[0])
    if port_is_free(port):
        return 0
    print(busy_port_message(port), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
