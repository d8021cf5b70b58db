"""Reads for the board (the index and category pages, the leaderboard API and exports): the
latest scored version of each probe with a Score under the requested weights spec, ranked.

Which Scores are on a board and in what order is written once, in leaderboard.models
(``ProbeVersion.objects.public()``, ``Score.objects.on_board()``, ``Score.objects.ranked()``); the
board's metric columns and their sort keys come from the metric table
(``evaluator.metrics.metric_table``, the rows with a ``column``). One module per job:

    query    the query (BoardQuery), the weights specs, the filters and the entries they select
    rows     BoardRow and Board, read by named columns; what the shown rows display (details)
    sorting  the sort keys, each as an SQL expression and as a Python order
    ranked   RankedRows: a board read a page at a time, ranked in the database; the cached counts
    columns  the board's columns in order, and how their values spread over the entries
    get      board_get, board_overview, the category tabs
"""
