"""``python -m tuner.sim ...``: run the simulated SGLang server."""

import sys

from tuner.sim import main

if __name__ == "__main__":
    sys.exit(main())
