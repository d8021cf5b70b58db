"""Pages for researchers: sign up, the submission form, a submission's live status, the API token."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from leaderboard.errors import ServiceError
from leaderboard.models import ApiToken, Submission
from leaderboard.selectors.submissions import submission_detail_get
from leaderboard.services.submissions import submission_create
from leaderboard.services.tokens import api_token_create, api_token_revoke
from leaderboard.web.forms import SignupForm, SubmissionForm
from probebench.security import form_throttled

# form field that shows a service error about a metadata key (without a metadata file: with one,
# the file's field shows them)
FIELD_FOR: dict[str | None, str | None] = {
    "training_data": "training_tasks",
    "trained_on": "trained_on",
    "declared_metrics": "declared_auroc",
    "metadata": None,
}


@require_http_methods(["GET", "POST"])
@form_throttled(scope="signup")
def signup(request):
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = form.save()
        login(request, user, backend="leaderboard.authentication.AccountBackend")
        return redirect("submit:new")
    return render(request, "leaderboard/signup.html", {"form": form})


@login_required
@require_http_methods(["GET", "POST"])
@form_throttled(scope="submissions")  # one budget with POST /api/v1/submissions
def submit(request):
    form = SubmissionForm(request.POST or None, request.FILES or None)
    refused: ServiceError | None = None
    if request.method == "POST" and form.is_valid():
        try:
            submission = submission_create(
                user=request.user,
                artifact=form.cleaned_data["artifact"],
                metadata=form.metadata_document(),
                recipe=form.cleaned_data["recipe"] or None,
                via="web",
            )
        except ServiceError as exc:
            refused = exc
            field = FIELD_FOR.get(exc.field, exc.field)
            # a key of the uploaded probe.json: said next to the file (the probe id of a new
            # version stays at its own field when it was given there)
            own_field = exc.field in ("artifact", "recipe") or (
                exc.field == "probe" and bool(form.cleaned_data.get("probe"))
            )
            if form.described_by_file and not own_field:
                field = "metadata"
            form.add_error(field if field in form.fields else None, exc.message)
            if "existing_url" in exc.extra:
                messages.info(request, f"The existing probe: {exc.extra['existing_url']}")
        else:
            messages.success(request, "Submitted: your probe is queued for evaluation.")
            return redirect(submission)
    status = 200 if request.method == "GET" or form.is_valid() and not form.errors else 400
    if refused is not None and refused.status_code in (429, 503):  # the queue cap, the broker down
        status = refused.status_code
    response = render(request, "leaderboard/submit.html", {"form": form}, status=status)
    for header, value in (refused.headers if refused is not None else {}).items():
        response[header] = value
    return response


def _visible_submission(request, pk: int) -> Submission:
    """A submission's details are private to its submitter (and staff): anyone else gets 404."""
    if not request.user.is_authenticated:
        raise Http404("no such submission")
    sub = submission_detail_get(pk=pk, user=request.user)
    if sub is None:
        raise Http404("no such submission")
    return sub


@login_required
def submission_detail(request, pk: int):
    sub = _visible_submission(request, pk)
    return render(request, "leaderboard/submission.html", {"sub": sub, "runs": sub.runs_sorted})


@login_required
def submission_status(request, pk: int):
    """The live part of the submission page, polled by the page's script."""
    sub = _visible_submission(request, pk)
    return render(request, "leaderboard/_submission_status.html", {"sub": sub, "runs": sub.runs_sorted})


@login_required
def my_submissions(request):
    subs = Submission.objects.filter(submitter=request.user).select_related("probe_version__probe")[:200]
    return render(request, "leaderboard/my_submissions.html", {"submissions": subs})


@login_required
def account(request):
    token = ApiToken.objects.filter(user=request.user).first()
    return render(request, "leaderboard/account.html", {"token": token})


@login_required
@require_POST
@never_cache  # the page that shows a new key is never stored by a cache
def account_token(request):
    """Create (or replace) the user's API token and show the key, this once; or revoke it
    (``action=revoke``). Only a hash of the key is stored (CSRF-protected POST)."""
    if request.POST.get("action") == "revoke":
        if api_token_revoke(user=request.user):
            messages.success(request, "Your API token was revoked; it no longer works.")
        return redirect("submit:account")
    replaced = ApiToken.objects.filter(user=request.user).exists()
    key = api_token_create(user=request.user)
    token = ApiToken.objects.get(user=request.user)
    return render(request, "leaderboard/account.html", {"token": token, "new_key": key, "replaced": replaced})
