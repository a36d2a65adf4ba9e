"""Mining data model: corpora, sentences, gold alignments, artefacts, runs and candidates."""

from .artefacts import Artefact, ArtefactKind
from .calibration import LanguagePairSetting
from .candidates import DocumentPairCandidate, SentencePairCandidate
from .corpus import Corpus, Document, GoldDocumentPair, GoldSentencePair, ImportJob, ImportPart, Sentence
from .jobs import FINISHED_STATUSES, Job, JobStatus
from .runs import MiningRun, RunKind, RunShard
from .verdict import Verdict

__all__ = [
    "FINISHED_STATUSES",
    "Job",
    "Artefact",
    "ArtefactKind",
    "Corpus",
    "Document",
    "DocumentPairCandidate",
    "GoldDocumentPair",
    "GoldSentencePair",
    "ImportJob",
    "ImportPart",
    "JobStatus",
    "LanguagePairSetting",
    "MiningRun",
    "RunKind",
    "RunShard",
    "Sentence",
    "SentencePairCandidate",
    "Verdict",
]
