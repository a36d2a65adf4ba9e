# Labels and campaign items keep pointing only at sentence-pair candidates that exist, but the check is no longer a
# foreign-key constraint. A foreign key onto the candidates table makes Postgres queue and run one check per deleted
# candidate per referencing table (2 million checks, about 20 s, for a run of 1M candidates); here one trigger per
# DELETE statement joins its transition table with the referencing rows, so deleting a run costs about as much as
# the DELETE itself. Measured in docs/BENCHMARKS.md ("Deleting a run").
#
# What the (deferred) foreign keys enforced, the triggers enforce, also deferred to commit:
# - insert or update of a label or item: its candidate exists, locked FOR KEY SHARE (a concurrent delete waits, then
#   finds the label); skipped when the row was deleted or changed again before commit (that change is checked);
# - delete of candidates: the statement trigger notes the deleted ids that are still referenced at the end of the
#   statement (usually none: run_delete removes labels and items first, but Django's collector may delete them
#   after the candidates) in annotation_sentence_pair_gone; at commit each noted id must be referenced no more;
# - truncate of the candidates table alone, or a change of a candidate's id, while they are referenced (at once).
# The delete check reads the referencing tables with a fresh snapshot per statement: correct under READ COMMITTED
# (Django's default isolation), like any check not done by Postgres's own RI code.

import django.db.models.deletion
from django.db import migrations, models

CANDIDATES = "mining_sentencepaircandidate"
REFERRERS = ("annotation_label", "annotation_campaignitem")

FORWARD = f"""
CREATE FUNCTION annotation_sentence_pair_exists() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    current_id bigint;
BEGIN
    IF NEW.sentence_pair_id IS NULL THEN
        RETURN NULL;
    END IF;
    EXECUTE format('SELECT sentence_pair_id FROM %I WHERE id = $1', TG_TABLE_NAME) INTO current_id USING NEW.id;
    IF current_id IS DISTINCT FROM NEW.sentence_pair_id THEN
        RETURN NULL;  -- deleted or changed again in this transaction: nothing (or the later change) to check
    END IF;
    PERFORM 1 FROM {CANDIDATES} WHERE id = NEW.sentence_pair_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
            MESSAGE = format('%s %s refers to sentence-pair candidate %s, which does not exist',
                             TG_TABLE_NAME, NEW.id, NEW.sentence_pair_id);
    END IF;
    RETURN NULL;
END $$;

CREATE TABLE annotation_sentence_pair_gone (candidate_id bigint NOT NULL);

CREATE FUNCTION annotation_sentence_pairs_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Dynamic SQL, so that each statement is planned for its own number of deleted rows (a cached plan made for
    -- one row would probe the referencing tables' indexes a million times).
    EXECUTE 'INSERT INTO annotation_sentence_pair_gone (candidate_id) SELECT DISTINCT g.id FROM gone g JOIN ('
            '    SELECT sentence_pair_id AS id FROM annotation_label WHERE sentence_pair_id IS NOT NULL'
            '    UNION ALL'
            '    SELECT sentence_pair_id FROM annotation_campaignitem WHERE sentence_pair_id IS NOT NULL'
            ') r ON r.id = g.id';
    RETURN NULL;
END $$;

CREATE FUNCTION annotation_sentence_pair_gone_check() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM annotation_sentence_pair_gone WHERE candidate_id = NEW.candidate_id;
    IF NOT FOUND OR EXISTS (SELECT 1 FROM {CANDIDATES} WHERE id = NEW.candidate_id) THEN
        RETURN NULL;  -- checked already by an earlier event for this id, or the id exists again
    END IF;
    IF EXISTS (SELECT 1 FROM annotation_label WHERE sentence_pair_id = NEW.candidate_id)
       OR EXISTS (SELECT 1 FROM annotation_campaignitem WHERE sentence_pair_id = NEW.candidate_id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
            MESSAGE = format('sentence-pair candidate %s was deleted but a label or campaign item still refers to it',
                             NEW.candidate_id);
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION annotation_sentence_pairs_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM annotation_label WHERE sentence_pair_id IS NOT NULL)
       OR EXISTS (SELECT 1 FROM annotation_campaignitem WHERE sentence_pair_id IS NOT NULL) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
            MESSAGE = 'sentence-pair candidates were truncated while labels or campaign items refer to them';
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION annotation_sentence_pair_id_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM annotation_label WHERE sentence_pair_id = OLD.id)
       OR EXISTS (SELECT 1 FROM annotation_campaignitem WHERE sentence_pair_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
            MESSAGE = format('sentence-pair candidate %s is referenced: its id cannot change', OLD.id);
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER sentence_pairs_deleted AFTER DELETE ON {CANDIDATES}
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION annotation_sentence_pairs_deleted();
CREATE CONSTRAINT TRIGGER sentence_pair_gone_check AFTER INSERT ON annotation_sentence_pair_gone
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION annotation_sentence_pair_gone_check();
CREATE TRIGGER sentence_pairs_truncated AFTER TRUNCATE ON {CANDIDATES}
    FOR EACH STATEMENT EXECUTE FUNCTION annotation_sentence_pairs_truncated();
CREATE TRIGGER sentence_pair_id_changed BEFORE UPDATE OF id ON {CANDIDATES}
    FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id) EXECUTE FUNCTION annotation_sentence_pair_id_changed();
""" + "".join(
    f"""
CREATE CONSTRAINT TRIGGER sentence_pair_exists AFTER INSERT OR UPDATE OF sentence_pair_id ON {table}
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION annotation_sentence_pair_exists();
"""
    for table in REFERRERS
)

BACKWARD = (
    "".join(f"DROP TRIGGER sentence_pair_exists ON {table};\n" for table in REFERRERS)
    + f"""
DROP TRIGGER sentence_pair_id_changed ON {CANDIDATES};
DROP TRIGGER sentence_pairs_truncated ON {CANDIDATES};
DROP TRIGGER sentence_pairs_deleted ON {CANDIDATES};
DROP FUNCTION annotation_sentence_pair_id_changed();
DROP FUNCTION annotation_sentence_pairs_truncated();
DROP TRIGGER sentence_pair_gone_check ON annotation_sentence_pair_gone;
DROP TABLE annotation_sentence_pair_gone;
DROP FUNCTION annotation_sentence_pair_gone_check();
DROP FUNCTION annotation_sentence_pairs_deleted();
DROP FUNCTION annotation_sentence_pair_exists();
"""
)


def _field(related_name: str) -> models.ForeignKey:
    return models.ForeignKey(
        blank=True,
        db_constraint=False,
        null=True,
        on_delete=django.db.models.deletion.CASCADE,
        related_name=related_name,
        to="mining.sentencepaircandidate",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0003_label_mode"),
        ("mining", "0008_sent_cand_doc_pair_index"),
    ]

    operations = [
        migrations.AlterField(model_name="campaignitem", name="sentence_pair", field=_field("campaign_items")),
        migrations.AlterField(model_name="label", name="sentence_pair", field=_field("labels")),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
