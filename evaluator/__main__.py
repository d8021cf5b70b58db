import sys

from evaluator.commands.cli import main

sys.exit(main())
