"""The data: the task/model/protocol registry, the dataset builders, the judges of generated text,
held-out splits, leakage checks and text hashing. Imports nothing of the evaluator but its errors."""
