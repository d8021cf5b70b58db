"""Every reference probe is "reproduced" under the current protocol.

Fast: the committed sidecars (reference.json, written by ``python -m evaluator reference-probes``
in float32) record every probe as reproduced, in float32. Slow (``-m slow``): the reproduction
check is rerun for every reference probe under the protocol (float32, the protocol's harvest
settings, judged by the re-fit's test scores), as the workers run it.
"""

from __future__ import annotations

import pytest

from evaluator.commands.reference_probes.evaluation import read_sidecar
from evaluator.commands.reference_probes.manifest import load_manifest
from evaluator.data.registry.load import load_registry
from tests.evaluator.conftest import PROJECT_ROOT, model_cache_dir


@pytest.fixture(scope="module")
def real_registry():
    return load_registry(PROJECT_ROOT)


def test_every_committed_reference_probe_was_measured_in_float32_and_reproduced(real_registry):
    for entry in load_manifest(real_registry):
        evaluation = read_sidecar(entry.directory(real_registry.root))["evaluation"]
        assert evaluation["model"]["dtype"] == "float32", entry.slug
        assert evaluation["reproduction"]["reproduced"] is True, entry.slug


@pytest.mark.slow
@pytest.mark.model
def test_every_reference_probe_is_reproduced_under_the_protocol(real_registry):
    from evaluator.axes.reproduction import reproduction_check
    from evaluator.core.models import load_model

    protocol = real_registry.protocol()
    for entry in load_manifest(real_registry):
        lm = load_model(
            entry.base_model, registry=real_registry, cache_dir=model_cache_dir(), protocol=protocol
        )
        result = reproduction_check(
            entry.directory(real_registry.root),
            registry=real_registry,
            cache_dir=model_cache_dir(),
            lm=lm,
            protocol=protocol,
        )
        assert result.protocol == protocol.id, entry.slug
        assert result.reproduced, (entry.slug, result.to_dict())
