from django.db import migrations

from sessionhub.db.compression import compress_with_lz4


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0002_continuity_stage"),
    ]

    operations = [
        compress_with_lz4("memory_continuityrecord", ["preamble", "candidates"]),
        compress_with_lz4("memory_observation", ["input_digest", "output_digest"]),
        compress_with_lz4("memory_streamtail", ["text", "final_message"]),
    ]
