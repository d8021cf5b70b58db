"""Public pages. Minimal until the leaderboard pages land; reads go through selectors."""

from django.shortcuts import get_object_or_404, render

from leaderboard.models import BaseModel, Category, Probe, ReevaluationCycle, Submission, Task


def index(request):
    categories = Category.objects.prefetch_related("tasks")
    return render(request, "leaderboard/index.html", {"categories": categories})


def category(request, slug):
    return render(request, "leaderboard/simple.html", {"object": get_object_or_404(Category, slug=slug)})


def probe(request, slug):
    return render(request, "leaderboard/simple.html", {"object": get_object_or_404(Probe, slug=slug)})


def task(request, slug):
    return render(request, "leaderboard/simple.html", {"object": get_object_or_404(Task, slug=slug)})


def model(request, slug):
    return render(request, "leaderboard/simple.html", {"object": get_object_or_404(BaseModel, slug=slug)})


def submission(request, pk):
    return render(request, "leaderboard/simple.html", {"object": get_object_or_404(Submission, pk=pk)})


def reevaluation(request, quarter):
    obj = get_object_or_404(ReevaluationCycle, quarter=quarter)
    return render(request, "leaderboard/simple.html", {"object": obj})
