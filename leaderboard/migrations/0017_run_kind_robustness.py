from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0016_run_kind_stress"),
    ]

    operations = [
        migrations.AlterField(
            model_name="evaluationrun",
            name="kind",
            field=models.CharField(
                choices=[
                    ("score", "Score"),
                    ("transfer", "Transfer"),
                    ("reference", "Reference"),
                    ("holdout", "Holdout"),
                    ("reproduce", "Reproduce"),
                    ("steer", "Steer"),
                    ("stress", "Stress"),
                    ("robustness", "Robustness"),
                ],
                default="score",
                max_length=20,
            ),
        ),
    ]
