"""``python -m gpuscope`` (and ``torchrun -m gpuscope``) runs the command line."""

from gpuscope.cli import main

raise SystemExit(main())
