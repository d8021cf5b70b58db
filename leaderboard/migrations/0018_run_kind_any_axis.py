"""A run's kind is any axis leaderboard.axes declares, checked in code: the field has no choices,
so a new axis needs no migration."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0017_run_kind_robustness"),
    ]

    operations = [
        migrations.AlterField(
            model_name="evaluationrun",
            name="kind",
            field=models.CharField(default="score", max_length=20),
        ),
    ]
