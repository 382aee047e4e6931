import sys

from relay.cli import main

if __name__ == "__main__":  # worker processes re-import this module under another name
    sys.exit(main())
