"""The measurement axes: the score run (``evaluate``) and each axis it or a command measures:
transfer, steering, stress, attack, latency, the text baselines and eval-awareness selection.
Imports the core, the metrics and the data."""
