"""The data model (docs/METHODOLOGY.md says what each entity is for), one module per job:

- ``catalog``: the registry mirrors (Category, License, WeightsSpec, BaseModel, Task, TaskSplit),
  written only by ``sync_registry``;
- ``probes``: Probe, ProbeVersion, Submission, and which versions are public;
- ``runs``: EvaluationRun, ReevaluationCycle and CycleResult;
- ``scores``: Score, RankInterval, ReferenceUpdate, the board's entries and its ranking;
- ``leakage``: LeakageRecord;
- ``accounts``: SystemAccount and ApiToken;
- ``bundles``: ResultBundle (signed bundles published or imported), PublishedRun and
  ReplicationReceipt.

Everything measured (EvaluationRun, Score) is written only by leaderboard.services. Every name is
re-exported here: import from ``leaderboard.models``. Member order follows Django's style: fields,
managers, Meta, __str__, save/delete, get_absolute_url, custom methods.
"""

from leaderboard.models.accounts import ApiToken, SystemAccount, is_system_account
from leaderboard.models.bundles import PublishedRun, ReplicationReceipt, ResultBundle
from leaderboard.models.catalog import BaseModel, Category, License, Task, TaskSplit, WeightsSpec
from leaderboard.models.leakage import LeakageRecord, LeakageRecordQuerySet
from leaderboard.models.probes import Probe, ProbeVersion, ProbeVersionQuerySet, Submission, public_q
from leaderboard.models.runs import (
    CycleResult,
    EvaluationRun,
    ReevaluationCycle,
    holdout_entry,
    holdout_items,
    holdout_public,
    holdouts_map,
)
from leaderboard.models.scores import (
    RankInterval,
    ReferenceUpdate,
    Score,
    ScoreQuerySet,
    board_rank_order,
    measured_ranking_annotations,
    score_ranking_key,
)

__all__ = [
    "PublishedRun",
    "ReplicationReceipt",
    "ResultBundle",
    "ApiToken",
    "BaseModel",
    "Category",
    "CycleResult",
    "EvaluationRun",
    "LeakageRecord",
    "LeakageRecordQuerySet",
    "License",
    "Probe",
    "ProbeVersion",
    "ProbeVersionQuerySet",
    "RankInterval",
    "ReevaluationCycle",
    "ReferenceUpdate",
    "Score",
    "ScoreQuerySet",
    "Submission",
    "SystemAccount",
    "Task",
    "TaskSplit",
    "WeightsSpec",
    "board_rank_order",
    "holdout_entry",
    "holdout_items",
    "holdout_public",
    "holdouts_map",
    "is_system_account",
    "measured_ranking_annotations",
    "public_q",
    "score_ranking_key",
]
