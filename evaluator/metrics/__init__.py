"""The numbers: the metric table and the metric functions, per-task measurement, the ProbeScore,
comparisons, rank intervals and the stored score records. Imports the data layer only."""
