"""`python -m pdctl.simulator serve MODEL [vLLM serve flags] [--sim-* flags]`: one simulated
engine process (pdctl/simulator/options.py says which flags it reads). Parses and prints only."""

from __future__ import annotations

import sys

from pdctl.errors import PdctlError
from pdctl.simulator import options, serve


def main(argv: list[str] | None = None) -> int:
    try:
        built = serve.build(options.parse(sys.argv[1:] if argv is None else argv))
        stop = serve.on_signals()
        built.engine.up()
    except PdctlError as error:
        print(f"error: {error.message}", file=sys.stderr)
        if error.hint:
            print(f"hint: {error.hint}", file=sys.stderr)
        return error.exit_code
    except OSError as error:
        print(f"error: cannot listen: {error}", file=sys.stderr)
        return 3
    print(serve.banner(built), flush=True)
    serve.serve_until(built.engine, stop)
    return 0


if __name__ == "__main__":
    sys.exit(main())
