"""Loaders and writers for the datasets and corpora of the field."""

from effirag.data.corpus import Corpus, load_corpus, passage_id, split_contents
from effirag.data.io import iter_jsonl, read_json, read_records, write_json, write_jsonl
from effirag.data.openie import OpenIEResult, load_openie, write_openie
from effirag.data.questions import LAYOUTS, QuestionSet, detect_layout, load_questions
from effirag.data.stats import dataset_stats
from effirag.data.writers import (
    example_to_flashrag,
    passage_to_flashrag,
    write_flashrag_corpus,
    write_flashrag_questions,
    write_hipporag_questions,
)

__all__ = [
    "LAYOUTS",
    "Corpus",
    "OpenIEResult",
    "QuestionSet",
    "dataset_stats",
    "detect_layout",
    "example_to_flashrag",
    "iter_jsonl",
    "load_corpus",
    "load_openie",
    "load_questions",
    "passage_id",
    "passage_to_flashrag",
    "read_json",
    "read_records",
    "split_contents",
    "write_flashrag_corpus",
    "write_flashrag_questions",
    "write_hipporag_questions",
    "write_json",
    "write_jsonl",
    "write_openie",
]
