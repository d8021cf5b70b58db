"""The maintainers' admin. Registry mirrors are read-only here (edit the files, then
``sync_registry``); measured rows (runs, scores) are read-only (only the workers write them)."""

from django import forms
from django.contrib import admin

from leaderboard import models as m
from leaderboard.errors import ServiceError


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
    fields = ("number", "artifact_sha256", "layer", "position", "input", "license", "reproduced", "created_at")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(m.Probe)
class ProbeAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "category", "base_model", "owner", "status", "stability_quarters", "is_reference")
    list_filter = ("category", "base_model", "status", "is_reference")
    search_fields = ("slug", "name", "owner__username")
    readonly_fields = ("slug", "owner", "category", "base_model", "created_at", "stability_quarters")
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
    readonly_fields = ("probe_version", "submitter", "status", "via", "progress", "step",
                       "failure_reason", "reviewed_by", "created_at", "updated_at", "finished_at")
    fields = readonly_fields + ("rejection_reason",)
    actions = ["reject_selected"]

    @admin.display(description="age (days)")
    def age_days(self, obj):
        return obj.age.days

    @admin.action(description="Reject selected submissions (uses each one's rejection reason)")
    def reject_selected(self, request, queryset):
        from leaderboard.services import submission_reject

        for sub in queryset:
            try:
                submission_reject(submission=sub, by=request.user, reason=sub.rejection_reason)
            except ServiceError as exc:
                self.message_user(request, f"submission {sub.pk}: {exc.message}", level="error")


@admin.register(m.EvaluationRun)
class EvaluationRunAdmin(ReadOnlyAdmin):
    list_display = ("id", "probe_version", "kind", "task", "split", "base_model", "status", "progress", "attempts", "worker_host")
    list_filter = ("status", "kind", "base_model")
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


class CycleStartForm(forms.ModelForm):
    class Meta:
        model = m.ReevaluationCycle
        fields = ("quarter",)

    def clean_quarter(self):
        from evaluator.errors import EvaluatorError
        from evaluator.holdouts import quarter_validate

        quarter = self.cleaned_data["quarter"]
        try:
            quarter_validate(quarter)
        except EvaluatorError as exc:
            raise forms.ValidationError(str(exc)) from None
        return quarter


@admin.register(m.ReevaluationCycle)
class ReevaluationCycleAdmin(admin.ModelAdmin):
    """Start a quarterly cycle with "Add" (the quarter only); everything else is read-only."""

    list_display = ("quarter", "status", "triggered_by", "started_at", "finished_at", "run_progress")
    inlines = [CycleResultInline]
    readonly_fields = ("quarter", "status", "triggered_by", "holdouts", "diff", "error", "started_at", "finished_at")

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = CycleStartForm
            kwargs["fields"] = ("quarter",)
        return super().get_form(request, obj, **kwargs)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else self.readonly_fields

    def get_inlines(self, request, obj):
        return self.inlines if obj is not None else []

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_add_permission(self, request):
        return request.user.is_staff

    @admin.display(description="runs done")
    def run_progress(self, obj):
        total = obj.runs.count()
        done = obj.runs.filter(status__in=["succeeded", "failed"]).count()
        return f"{done}/{total}"

    def save_model(self, request, obj, form, change):
        from leaderboard.reevaluation import reevaluation_start

        try:
            cycle = reevaluation_start(quarter=obj.quarter, by=request.user)
        except ServiceError as exc:
            self.message_user(request, exc.message, level="error")
            raise _CycleNotStarted from None
        obj.pk = cycle.pk

    def add_view(self, request, form_url="", extra_context=None):
        try:
            return super().add_view(request, form_url, extra_context)
        except _CycleNotStarted:
            from django.shortcuts import redirect

            return redirect("admin:leaderboard_reevaluationcycle_changelist")


class _CycleNotStarted(Exception):
    pass


@admin.register(m.ReferenceUpdate)
class ReferenceUpdateAdmin(ReadOnlyAdmin):
    list_display = ("base_model", "old_version", "new_version", "status", "created_at")


@admin.register(m.LeakageRecord)
class LeakageRecordAdmin(admin.ModelAdmin):
    """Review: confirm (public, permanent) or dismiss. A confirmed record is read-only for everyone."""

    list_display = ("id", "probe", "source", "rule", "status", "created_at", "reviewed_by")
    list_filter = ("status", "source")
    search_fields = ("probe__slug", "summary")
    fields = ("probe", "probe_version", "source", "rule", "summary", "evidence", "status",
              "public_note", "opened_by", "reviewed_by", "created_at", "reviewed_at")

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.status == m.LeakageRecord.Status.CONFIRMED:
            return self.fields
        return ("source", "rule", "opened_by", "reviewed_by", "created_at", "reviewed_at", "status")

    def has_delete_permission(self, request, obj=None):
        return obj is None or obj.status != m.LeakageRecord.Status.CONFIRMED

    def save_model(self, request, obj, form, change):
        from leaderboard.services import leakage_record_open

        if not change:
            record = leakage_record_open(
                probe=obj.probe, probe_version=obj.probe_version, summary=obj.summary,
                evidence=obj.evidence, opened_by=request.user,
            )
            obj.pk = record.pk
        else:
            super().save_model(request, obj, form, change)

    actions = ["confirm_selected", "dismiss_selected"]

    @admin.action(description="Confirm selected records (public and permanent)")
    def confirm_selected(self, request, queryset):
        from leaderboard.services import leakage_record_review

        for record in queryset.filter(status=m.LeakageRecord.Status.OPEN):
            leakage_record_review(record=record, by=request.user, confirm=True, note=record.public_note)

    @admin.action(description="Dismiss selected records")
    def dismiss_selected(self, request, queryset):
        from leaderboard.services import leakage_record_review

        for record in queryset.filter(status=m.LeakageRecord.Status.OPEN):
            leakage_record_review(record=record, by=request.user, confirm=False, note=record.public_note)
