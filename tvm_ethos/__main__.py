"""``python -m tvm_ethos``: the same as the ``tvmc`` console script."""
import sys

from tvm_ethos.cli import main

if __name__ == "__main__":
    sys.exit(main())
