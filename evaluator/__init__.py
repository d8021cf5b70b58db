"""ProbeBench evaluator: pure ML, importable without Django.

Submodules are imported on demand; ``import evaluator`` stays cheap (no torch, no sklearn).
The evaluator never touches the database and never reads Django settings: every value it needs
is passed in as an argument.
"""

__version__ = "0.1.0"

#: Bumped whenever a change alters the numbers the evaluator produces; recorded on every run and
#: part of every activation-cache key.
CODE_VERSION = "evaluator-0.1.0"
