"""The read API (``/api/v1/``): one view per endpoint, each with its OutputSerializer; one module per
family of endpoints:

    base      PublicReadApi (anonymous, GET only), the probe id pattern
    board     the board (``/leaderboard``): its query parameters and its rows, whose metric fields
              and their help text come from the metric table
    exports   the whole board as CSV and as one JSON document, from the board's own serializer
    probes    one probe: its versions, scores, per-task results, history and leakage
    registry  categories, tasks, base models, weights specs
    records   the public records: re-evaluation cycles, reference updates, leakage, the per-example
              exports, the queue

Reads go through leaderboard.selectors; serializers only shape what the selectors return. Public
reads carry ``Cache-Control: public, max-age=…`` and an ETag (a matching ``If-None-Match`` gets
304). The board's CSV and JSON exports are built from the same serializer as the API rows, so they
agree field for field.
"""
