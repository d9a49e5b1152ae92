"""python -m vramscope run|boot-path|attach — see _cli.main."""
import sys

from ._cli import main

if __name__ == "__main__":
    sys.exit(main())
