"""The web submission form: the same fields as the API's metadata JSON, or that JSON itself (the
probe.json ``python -m evaluator train`` writes, uploaded as the API takes it), validated
server-side by the same service (errors come back next to the field they concern)."""

from __future__ import annotations

from django import forms
from django.contrib.auth.forms import UserCreationForm

from evaluator.core.applicability import INPUTS, OUTPUTS, POSITIONS
from leaderboard.accounts import username_reserved
from leaderboard.errors import ServiceError
from leaderboard.models import BaseModel, Category, License, Task
from leaderboard.validation import parse_json_field

#: the fields a metadata file (probe.json) replaces: required only without one
DESCRIBED_BY_METADATA = ("name", "category", "base_model", "layer", "position", "input", "output", "license")


class SubmissionForm(forms.Form):
    artifact = forms.FileField(help_text="probe.safetensors (never a pickle)")
    metadata = forms.FileField(
        required=False,
        label="Metadata (probe.json)",
        help_text="the probe.json `python -m evaluator train` wrote beside the artifact, or any metadata JSON"
        " the API takes: it describes the probe (and carries its recipe), so the fields below are then not"
        " read, except a recipe given below and the probe id of a new version",
    )
    name = forms.CharField(max_length=160)
    category = forms.ModelChoiceField(queryset=Category.objects.all(), to_field_name="slug")
    base_model = forms.ModelChoiceField(
        queryset=BaseModel.objects.filter(is_active=True), to_field_name="slug"
    )
    layer = forms.IntegerField(min_value=0, help_text="0 = embeddings, L = residual after block L")
    position = forms.ChoiceField(choices=[(p, p) for p in POSITIONS])
    input = forms.ChoiceField(choices=[(p, p) for p in INPUTS], label="Input")
    output = forms.ChoiceField(choices=[(p, p) for p in OUTPUTS])
    license = forms.ModelChoiceField(queryset=License.objects.all(), to_field_name="spdx_id")
    authors = forms.CharField(max_length=500, required=False, help_text="comma-separated")
    paper_url = forms.URLField(required=False, assume_scheme="https")
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    training_tasks = forms.ModelMultipleChoiceField(
        queryset=Task.objects.all(),
        to_field_name="slug",
        required=False,
        help_text="task train splits the probe was trained on",
    )
    training_external = forms.CharField(max_length=1000, required=False, label="External training data")
    training_text_sha256 = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}),
        required=False,
        label="Training text hashes",
        help_text="external data: the SHA-256 of each normalised training text, one per line"
        " (python -m evaluator text-hashes FILE)",
    )
    trained_on = forms.ModelMultipleChoiceField(
        queryset=Task.objects.all(),
        to_field_name="slug",
        required=False,
        label="Trained on",
        help_text="required without a recipe: the tasks it was trained on (its in-domain tasks; the"
        " category's other tasks are cross-domain)",
    )
    trained_on_external = forms.BooleanField(
        required=False,
        label="Trained on external data",
        help_text="data outside the registry (declare its text hashes above)",
    )
    declared_auroc = forms.FloatField(min_value=0, max_value=1, required=False, label="Declared AUROC")
    recipe = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        required=False,
        help_text='optional JSON, e.g. {"method": "logistic_regression", "task": "…", "layer": 15, "seed": 0}',
    )
    probe = forms.CharField(
        max_length=120, required=False, help_text="your probe's slug, to upload a new version"
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.files.get("metadata"):  # the file describes the probe: its fields are not asked for
            for name in DESCRIBED_BY_METADATA:
                self.fields[name].required = False

    @property
    def described_by_file(self) -> bool:
        """Whether an uploaded metadata file (probe.json) describes the probe."""
        return bool(self.files.get("metadata"))

    def clean_metadata(self) -> dict | None:
        """The uploaded probe.json parsed as the API parses its metadata field (size, depth, strict
        JSON); its content is checked by the service like any metadata."""
        upload = self.cleaned_data.get("metadata")
        if not upload:
            return None
        try:
            document = parse_json_field(upload, "metadata")
        except ServiceError as exc:
            raise forms.ValidationError(exc.message, code="invalid") from None
        if not isinstance(document, dict):
            raise forms.ValidationError(
                "metadata: must be a JSON object, like the probe.json `python -m evaluator train` writes",
                code="invalid",
            )
        return document

    def metadata_document(self) -> dict:
        """The metadata JSON the service validates: the uploaded probe.json (with the probe id of a
        new version, when given in the form), else the form's fields."""
        d = self.cleaned_data
        if d.get("metadata") is not None:
            meta = dict(d["metadata"])
            if d.get("probe"):
                meta["probe"] = d["probe"]
            return meta
        meta = {
            "name": d["name"],
            "category": d["category"].slug,
            "base_model": d["base_model"].slug,
            "layer": d["layer"],
            "position": d["position"],
            "input": d["input"],
            "output": d["output"],
            "license": d["license"].spdx_id,
            "authors": [a.strip() for a in d["authors"].split(",") if a.strip()],
            "paper_url": d["paper_url"],
            "description": d["description"],
            "training_data": {
                "tasks": [t.slug for t in d["training_tasks"]],
                "external": d["training_external"],
            },
        }
        hashes = d["training_text_sha256"].split()
        if hashes:
            meta["training_data"]["text_sha256"] = hashes
        trained_on = [t.slug for t in d["trained_on"]] + (["external"] if d["trained_on_external"] else [])
        if trained_on:
            meta["trained_on"] = trained_on
        if d.get("declared_auroc") is not None:
            meta["declared_metrics"] = {"auroc": d["declared_auroc"]}
        if d.get("probe"):
            meta["probe"] = d["probe"]
        return meta


class SignupForm(UserCreationForm):
    email = forms.EmailField(required=True)

    class Meta(UserCreationForm.Meta):
        fields = ("username", "email")

    def clean_username(self):
        username = super().clean_username()
        if username and username_reserved(username):
            raise forms.ValidationError(
                "This username is reserved: it is, contains or looks like a name the site itself uses"
                " (the reference probes' account, an administrator's); please choose another.",
                code="reserved",
            )
        return username
