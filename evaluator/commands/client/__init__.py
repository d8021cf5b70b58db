"""The researcher's client: ``submit``, ``follow`` and ``reproduce`` against a ProbeBench server.

    python -m evaluator submit DIR --server URL --token T [--wait]
    python -m evaluator follow ID --server URL --token T
    python -m evaluator reproduce --server URL --probe SLUG[@vN] [--token T]

One module per job: ``transport`` (the one HTTP path and the server options every command shares),
``submit`` (``submit`` and ``follow``), ``reproduce``. Standard library HTTP only (urllib), no
Django; the model code is imported only by ``evaluate``.
"""
