"""Versions stored before the metadata was normalised at submission hold the metadata as it was
sent; the workers read it with stricter rules, so an ``authors`` string failed every run. Their
``authors`` (the one shape the submission check accepted and the workers refused) becomes the
list the version's own ``authors`` column already holds."""

from django.db import migrations


def forward(apps, schema_editor):
    ProbeVersion = apps.get_model("leaderboard", "ProbeVersion")
    for version in ProbeVersion.objects.only("pk", "metadata", "authors").iterator():
        metadata = version.metadata
        if isinstance(metadata, dict) and not isinstance(metadata.get("authors", []), list):
            metadata["authors"] = list(version.authors or [])
            ProbeVersion.objects.filter(pk=version.pk).update(metadata=metadata)


class Migration(migrations.Migration):
    dependencies = [("leaderboard", "0011_leakage_no_replace_by_update")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
