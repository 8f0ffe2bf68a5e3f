"""`python -m pdctl.standin`: the router stand-in as a process, until SIGTERM or SIGINT."""

from __future__ import annotations

import sys

from pdctl.errors import UsageError
from pdctl.standin import server


def main(argv: list[str] | None = None) -> int:
    try:
        options = server.parse(sys.argv[1:] if argv is None else argv)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    server.run(options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
