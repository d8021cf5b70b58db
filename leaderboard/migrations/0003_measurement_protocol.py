"""Every run and score records the measurement protocol and the environment it was measured in
(registry/protocols/p1.yaml, evaluator/environment.py)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0002_leakage_immutable_triggers"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluationrun",
            name="protocol",
            field=models.CharField(blank=True, max_length=20),
        ),
        migrations.AddField(
            model_name="evaluationrun",
            name="environment",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="score",
            name="protocol",
            field=models.CharField(blank=True, max_length=20),
        ),
        migrations.AddField(
            model_name="score",
            name="environment",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
