# The candidate tables' src/tgt foreign keys get indexes of their own: deleting a sentence or document checks the
# candidates that point at it, and without an index each check scanned the (run, src, tgt) index of every run.
# Built CONCURRENTLY (atomic = False), so a deployment with millions of candidates keeps working meanwhile.

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("mining", "0009_crawl_documents_and_import_parts"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="sentencepaircandidate", index=models.Index(fields=["src"], name="sent_cand_src")
        ),
        AddIndexConcurrently(
            model_name="sentencepaircandidate", index=models.Index(fields=["tgt"], name="sent_cand_tgt")
        ),
        AddIndexConcurrently(
            model_name="documentpaircandidate", index=models.Index(fields=["src"], name="doc_cand_src")
        ),
        AddIndexConcurrently(
            model_name="documentpaircandidate", index=models.Index(fields=["tgt"], name="doc_cand_tgt")
        ),
        migrations.AddField(
            model_name="corpus",
            name="deleting",
            field=models.BooleanField(
                default=False,
                help_text="Being deleted (in batches): no run or import may start on it; delete it again to finish.",
            ),
        ),
    ]
