from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("leaderboard", "0015_board_orders"),
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
                ],
                default="score",
                max_length=20,
            ),
        ),
    ]
