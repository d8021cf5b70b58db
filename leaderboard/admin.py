"""The maintainers' admin. Registry mirrors are read-only here (edit the files, then
``sync_registry``); measured rows (runs, scores) are read-only (only the workers write them)."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied

from leaderboard import models as m
from leaderboard.axes import AXES
from leaderboard.errors import ServiceError, ValidationFailed
from leaderboard.validation import probe_name_clean


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(m.Category)
class CategoryAdmin(ReadOnlyAdmin):
    list_display = ("slug", "name", "order")


@admin.register(m.License)
class LicenseAdmin(ReadOnlyAdmin):
    list_display = ("spdx_id", "name", "score")


@admin.register(m.WeightsSpec)
class WeightsSpecAdmin(ReadOnlyAdmin):
    list_display = ("version", "released", "sha256")


@admin.register(m.BaseModel)
class BaseModelAdmin(ReadOnlyAdmin):
    list_display = ("slug", "family", "architecture", "n_layers", "d_model", "weights_license")


class TaskSplitInline(admin.TabularInline):
    model = m.TaskSplit
    extra = 0
    can_delete = False
    readonly_fields = ("name", "path", "rows", "sha256")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(m.Task)
class TaskAdmin(ReadOnlyAdmin):
    list_display = ("slug", "category", "family", "status", "minted")
    list_filter = ("category", "status")
    inlines = [TaskSplitInline]


class ProbeVersionInline(admin.TabularInline):
    model = m.ProbeVersion
    extra = 0
    can_delete = False
    fields = (
        "number",
        "artifact_sha256",
        "layer",
        "position",
        "input",
        "license",
        "reproduced",
        "created_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


class ProbeAdminForm(forms.ModelForm):
    """A rename follows the submission's text rules (``validation.probe_name_clean``)."""

    class Meta:
        model = m.Probe
        fields = ("name",)  # the admin adds the other editable fields

    def clean_name(self) -> str:
        try:
            return probe_name_clean(self.cleaned_data["name"])
        except ValidationFailed as exc:
            raise forms.ValidationError(exc.message.removeprefix("name: ")) from None


@admin.register(m.Probe)
class ProbeAdmin(admin.ModelAdmin):
    form = ProbeAdminForm
    list_display = (
        "slug",
        "name",
        "category",
        "base_model",
        "owner",
        "status",
        "stability_quarters",
        "is_reference",
    )
    list_filter = ("category", "base_model", "status", "is_reference")
    search_fields = ("slug", "name", "owner__username")
    # Reference role, status and deprecation are written by the services (reference updates,
    # quarterly cycles), which also rescore and record why: never edited by hand here.
    readonly_fields = (
        "slug",
        "owner",
        "category",
        "base_model",
        "is_reference",
        "reference_role",
        "status",
        "deprecated_reason",
        "deprecated_at",
        "created_at",
        "stability_quarters",
    )
    inlines = [ProbeVersionInline]


@admin.register(m.ProbeVersion)
class ProbeVersionAdmin(ReadOnlyAdmin):
    list_display = ("__str__", "artifact_sha256", "layer", "license", "reproduced", "created_at")
    search_fields = ("probe__slug", "artifact_sha256")


@admin.register(m.Submission)
class SubmissionAdmin(admin.ModelAdmin):
    """The review queue, oldest open submission first, with its age against the 7-day goal."""

    list_display = ("id", "probe_version", "submitter", "status", "age_days", "created_at")
    list_filter = ("status", "via")
    ordering = ("created_at",)
    search_fields = ("probe_version__probe__slug", "submitter__username")
    readonly_fields = (
        "probe_version",
        "submitter",
        "status",
        "via",
        "progress",
        "step",
        "failure_reason",
        "reviewed_by",
        "created_at",
        "updated_at",
        "finished_at",
    )
    fields = readonly_fields + ("rejection_reason",)
    actions = ["reject_selected"]

    @admin.display(description="age (days)")
    def age_days(self, obj):
        return obj.age.days

    @admin.action(description="Reject selected submissions (uses each one's rejection reason)")
    def reject_selected(self, request, queryset):
        from leaderboard.services.submissions import submission_reject

        for sub in queryset:
            try:
                submission_reject(submission=sub, by=request.user, reason=sub.rejection_reason)
            except ServiceError as exc:
                self.message_user(request, f"submission {sub.pk}: {exc.message}", level="error")


class RunKindFilter(admin.SimpleListFilter):
    """The run kinds by axis, in the order of leaderboard.axes.AXES (the field has no choices)."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request, model_admin):
        return [(a.name, a.label) for a in AXES]

    def queryset(self, request, queryset):
        return queryset.filter(kind=self.value()) if self.value() else queryset


@admin.register(m.EvaluationRun)
class EvaluationRunAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "probe_version",
        "kind",
        "task",
        "split",
        "base_model",
        "status",
        "progress",
        "attempts",
        "worker_host",
    )
    list_filter = ("status", RunKindFilter, "base_model")
    exclude = ("example_scores",)


@admin.register(m.Score)
class ScoreAdmin(ReadOnlyAdmin):
    list_display = ("probe_version", "spec", "total", "measured_total", "computed_at")
    list_filter = ("spec",)


class CycleResultInline(admin.TabularInline):
    model = m.CycleResult
    extra = 0
    can_delete = False
    readonly_fields = ("probe_version", "reference_auroc", "holdout_auroc", "drop_points", "outcome")

    def has_add_permission(self, request, obj=None):
        return False


class CycleStartForm(forms.Form):
    quarter = forms.CharField(max_length=6, help_text="e.g. 2026Q4: one cycle per quarter")

    def clean_quarter(self):
        from evaluator.data.holdouts import quarter_validate
        from evaluator.errors import EvaluatorError

        quarter = self.cleaned_data["quarter"].strip()
        try:
            quarter_validate(quarter)
        except EvaluatorError as exc:
            raise forms.ValidationError(str(exc)) from None
        return quarter


@admin.register(m.ReevaluationCycle)
class ReevaluationCycleAdmin(admin.ModelAdmin):
    """Start a quarterly cycle with "Add" (the quarter only); everything else is read-only.

    The start runs outside the admin's own transaction, so that a cycle stopped by a split file
    that does not match tasks.yaml stays recorded (failed, with the reason) for the public."""

    list_display = ("quarter", "status", "triggered_by", "started_at", "finished_at", "run_progress")
    inlines = [CycleResultInline]
    # the seed and the holdouts' rows and ids stay off this page too: the commitment and what the
    # public pages show of each holdout; the reveal is public once the cycle has completed
    readonly_fields = (
        "quarter",
        "status",
        "run_progress",
        "triggered_by",
        "holdouts_public",
        "commitment",
        "revealed_at",
        "diff",
        "error",
        "started_at",
        "finished_at",
    )
    fields = readonly_fields

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else []

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return request.user.is_staff

    @admin.display(description="holdouts")
    def holdouts_public(self, obj):
        return obj.public_holdouts()

    @admin.display(description="runs done")
    def run_progress(self, obj):
        total = obj.runs.count()
        done = obj.runs.filter(status__in=["succeeded", "failed"]).count()
        return f"{done}/{total}"

    def add_view(self, request, form_url="", extra_context=None):
        from django.shortcuts import redirect
        from django.template.response import TemplateResponse

        from leaderboard.services.reevaluation import reevaluation_start

        if not self.has_add_permission(request):
            raise PermissionDenied
        form = CycleStartForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            quarter = form.cleaned_data["quarter"]
            try:
                cycle = reevaluation_start(quarter=quarter, by=request.user)
            except ServiceError as exc:
                self.message_user(request, exc.message, level=messages.ERROR)
                return redirect("admin:leaderboard_reevaluationcycle_changelist")
            self.message_user(
                request,
                f"cycle {quarter} started: {len(cycle.holdouts)} holdout(s) minted,"
                f" {cycle.runs.count()} run(s) queued",
                level=messages.SUCCESS,
            )
            return redirect("admin:leaderboard_reevaluationcycle_change", cycle.pk)
        context = {
            **self.admin_site.each_context(request),
            "title": "Start a quarterly re-evaluation",
            "form": form,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/leaderboard/cycle_start.html", context)


@admin.register(m.ReferenceUpdate)
class ReferenceUpdateAdmin(ReadOnlyAdmin):
    list_display = ("base_model", "old_version", "new_version", "status", "created_at")


class LeakageOpenForm(forms.ModelForm):
    """A maintainer opens a record by hand: which probe (and version), what, and the evidence."""

    class Meta:
        model = m.LeakageRecord
        fields = ("probe", "probe_version", "summary", "evidence")

    def clean(self):
        super().clean()
        data = self.cleaned_data  # what ModelForm.clean returns
        version = data.get("probe_version")
        if version is not None and data.get("probe") is not None and version.probe_id != data["probe"].pk:
            self.add_error("probe_version", "this version belongs to another probe")
        if not data.get("evidence"):
            self.add_error(
                "evidence", 'a record opened by hand needs evidence, e.g. {"overlap": [...], "source": "..."}'
            )
        return data


class LeakageReviewForm(forms.ModelForm):
    """An open record: edit the public note, then confirm (public and permanent) or dismiss."""

    decision = forms.ChoiceField(
        choices=[("", "keep open"), ("confirm", "confirm: public and permanent"), ("dismiss", "dismiss")],
        required=False,
        help_text="confirming needs a public note and can never be undone",
    )

    class Meta:
        model = m.LeakageRecord
        fields = ("summary", "evidence", "public_note")

    def clean(self):
        super().clean()
        data = self.cleaned_data  # what ModelForm.clean returns
        if data.get("decision") == "confirm" and not (data.get("public_note") or "").strip():
            self.add_error("public_note", "confirming a leakage record needs a public note")
        return data


@admin.register(m.LeakageRecord)
class LeakageRecordAdmin(admin.ModelAdmin):
    """Open a record by hand (with evidence); review an open one: confirm (public, permanent) or
    dismiss. Reviewed records are view-only for everyone, and confirmed ones cannot be deleted (the
    model layer and the database refuse too)."""

    list_display = ("id", "probe", "source", "rule", "status", "created_at", "reviewed_by")
    list_filter = ("status", "source", "rule")
    search_fields = ("probe__slug", "summary")
    actions = ["confirm_selected", "dismiss_selected"]
    REVIEW_FIELDS = (
        "probe",
        "probe_version",
        "source",
        "rule",
        "status",
        "summary",
        "evidence",
        "public_note",
        "decision",
        "opened_by",
        "reviewed_by",
        "created_at",
        "reviewed_at",
    )
    EDITABLE_WHILE_OPEN = ("summary", "evidence", "public_note", "decision")

    def get_form(self, request, obj=None, change=False, **kwargs):
        kwargs["form"] = LeakageOpenForm if obj is None else LeakageReviewForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        if obj is None:
            return LeakageOpenForm.Meta.fields
        if obj.status == m.LeakageRecord.Status.OPEN:
            return self.REVIEW_FIELDS
        return tuple(f for f in self.REVIEW_FIELDS if f != "decision")

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ()
        editable = self.EDITABLE_WHILE_OPEN if obj.status == m.LeakageRecord.Status.OPEN else ()
        return tuple(f for f in self.get_fields(request, obj) if f not in editable)

    def has_change_permission(self, request, obj=None):
        if obj is not None and obj.status != m.LeakageRecord.Status.OPEN:
            return False  # reviewed: view only
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.status == m.LeakageRecord.Status.CONFIRMED:
            return False
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request, queryset):
        if queryset.filter(status=m.LeakageRecord.Status.CONFIRMED).exists():
            raise PermissionDenied("confirmed leakage records cannot be deleted")
        super().delete_queryset(request, queryset)

    def save_model(self, request, obj, form, change):
        from leaderboard.services.leakage import leakage_record_open, leakage_record_review

        if not change:
            record = leakage_record_open(
                probe=obj.probe,
                probe_version=obj.probe_version,
                summary=obj.summary,
                evidence=obj.evidence,
                opened_by=request.user,
            )
            obj.pk = record.pk
            return
        super().save_model(request, obj, form, change)  # the edits of an open record
        decision = form.cleaned_data.get("decision")
        if decision:
            leakage_record_review(
                record=obj, by=request.user, confirm=decision == "confirm", note=obj.public_note
            )
            obj.refresh_from_db()

    @admin.action(description="Confirm selected records (public and permanent; each needs its public note)")
    def confirm_selected(self, request, queryset):
        self._review(request, queryset, confirm=True)

    @admin.action(description="Dismiss selected records")
    def dismiss_selected(self, request, queryset):
        self._review(request, queryset, confirm=False)

    def _review(self, request, queryset, *, confirm: bool) -> None:
        from leaderboard.services.leakage import leakage_record_review

        for record in queryset.filter(status=m.LeakageRecord.Status.OPEN):
            try:
                leakage_record_review(
                    record=record, by=request.user, confirm=confirm, note=record.public_note
                )
            except ServiceError as exc:
                self.message_user(request, f"record {record.pk}: {exc.message}", level=messages.ERROR)
