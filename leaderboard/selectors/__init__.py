"""Reads for the public pages, the read API and the exports, one module per page family:

    board/       the board (index, category pages, leaderboard API, exports), one module per job
    registry     categories, tasks, base models, methodology
    probes       the probe page
    cycles       re-evaluation cycles, reference updates, leakage records (the public records)
    submissions  the submission pages, the submission API, the public queue
    progress     what is still being measured (board pages while they fill, the public queue's
                 failed reference probes, the demo's progress line)
    shared       reads the services need too (imported by leaderboard.services)

Every function runs a fixed number of SQL queries whatever the number of probes (related rows come
with ``select_related`` / ``prefetch_related`` or as annotations), and returns plain data for
views, serializers and templates. Nothing here writes, and nothing here imports a service
(import-linter checks it). Display labels and formula text live in ``leaderboard.presentation``.

What is public: a probe version is shown once its submission is *scored*; the board
shows the latest scored version of each probe that has a Score under the requested weights spec.
Rejected and failed submissions never appear; the public queue lists open submissions without
private details. Confirmed leakage records are shown forever.
"""
