"""The command line (``python -m evaluator <command>``): the parser and one module per group of
commands. The top layer: nothing else in the evaluator imports it."""
