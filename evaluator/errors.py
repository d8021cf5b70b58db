"""Exceptions the evaluator raises. Each carries a message a user can act on."""


class EvaluatorError(Exception):
    """Base class for every error the evaluator raises on purpose."""


class RegistryError(EvaluatorError):
    """tasks.yaml, licenses.yaml, models.yaml or a weights spec is invalid."""


class SplitHashMismatch(RegistryError):
    """A split file's bytes do not match the SHA-256 pinned in tasks.yaml."""

    def __init__(self, path: str, expected: str, actual: str):
        self.path, self.expected, self.actual = path, expected, actual
        super().__init__(f"split file {path}: SHA-256 {actual} does not match the pinned {expected}")


class UnknownNameError(EvaluatorError):
    """A name (license, spec, metric, task, model...) is not in its registry."""

    def __init__(self, kind: str, name: str, accepted: list[str]):
        import difflib

        self.kind, self.name, self.accepted = kind, name, list(accepted)
        hint = difflib.get_close_matches(str(name), self.accepted, n=1)
        did_you_mean = f" (did you mean {hint[0]!r}?)" if hint else ""
        super().__init__(f"unknown {kind} {name!r}{did_you_mean}; accepted: {', '.join(self.accepted)}")


class MetricInputError(EvaluatorError):
    """Scores/labels given to a metric are malformed (one class only, NaN, length mismatch)."""


class ArtifactError(EvaluatorError):
    """A probe artifact is invalid: not safetensors, truncated, wrong shape, non-finite..."""


class InfrastructureError(EvaluatorError):
    """A fault of the machine, not of the artifact (missing model package, I/O): retry later."""
