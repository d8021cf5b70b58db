"""Reference probes: the maintainers' probes that ship with the board, trained reproducibly.

``registry/reference_probes/manifest.yaml`` lists every reference probe, eval-awareness reference
probes first (the substrate of every ``auroc_ea``): its slug, directory, role, a one-line *why*,
and how it is trained — base model, method, task, position, input, hyperparameters, seed and the
candidate layers. The layer is not written in the manifest: it is chosen by a **layer sweep on
the task's train split only** (:func:`~evaluator.commands.reference_probes.sweep.layer_sweep`):

- every candidate layer's train activations (one harvest, all layers, through the shared
  activation cache);
- 5-fold grouped, stratified cross-validation on train (``StratifiedGroupKFold``, shuffled with
  the recipe seed; a row's ``group`` never straddles two folds), the recipe fitted on four folds
  and scored on the fifth;
- the chosen layer has the highest mean held-out AUROC (rounded to 3 decimals); ties, common
  where a task saturates at 1.000, are broken by the lowest mean held-out log-loss (rounded to
  4 decimals), then by the lower layer. test, distshift and holdout are never read to choose.

Then the recipe is fitted on the whole train split at that layer, written with
:func:`evaluator.core.probes.save_probe` (``probe.safetensors`` + ``probe.json``, the submission
metadata) and evaluated by :func:`evaluator.axes.evaluate.evaluate_probe` (with the same base model's
eval-awareness reference probe, without cross-model transfer, which the workers compute). The
sweep, the evaluation and the artifact hash go to a sidecar ``reference.json`` beside the probe.

    python -m evaluator reference-probes                      # retrain + evaluate + write all
    python -m evaluator reference-probes --only ea-smollm2    # one (or several, comma-separated)
    python -m evaluator reference-probes --check              # retrain in memory, compare, write nothing
    python -m evaluator reference-probes --reevaluate         # keep the artifacts, re-measure, rewrite
    python -m evaluator reference-probes --check-records      # is every reference.json current? (no model)

Everything is seeded; with the same activations (same cache entries) a rerun writes identical
artifacts. ``--check`` compares a fresh fit with the committed artifact (same chosen layer, same
tensor names/shapes, direction cosine and max abs difference within tolerance).

A record is *stale* (:func:`~evaluator.commands.reference_probes.stale.record_problems`) when what it was measured with has changed since: the
artifact's bytes, the eval-awareness reference probe behind its auroc_ea (another probe, or other
bytes), a split file's pinned hash, or the base model's weights; or when probe.json's declared
metrics are not the record's. ``--reevaluate`` measures the committed artifacts again (no refit)
and rewrites the records; ``--check-records`` lists what is stale, and the test suite runs it.

One module per job: ``manifest``, ``sweep`` (the layer sweep), ``training``, ``evaluation`` (the
evaluation and the files), ``stale`` (stale records, ``--reevaluate``), ``check`` (``--check``)
and ``command`` (the ``reference-probes`` command). Nothing is re-exported here.
"""
