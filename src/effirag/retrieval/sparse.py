"""Sparse retrieval: BM25 through ``bm25s``, persisted with bm25s's own numpy/json files (no pickle).

bm25s precomputes every (term, document) BM25 weight into a sparse CSC matrix, so a query costs one sparse column sum
per query term. Tokenisation is bm25s's (scikit-learn's ``\\b\\w\\w+\\b`` pattern, lowercase, English stopwords,
optional PyStemmer stemming); the same settings are saved with the index and re-applied to queries.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from effirag.config import check, option
from effirag.errors import ConfigError, IndexMismatchError

log = logging.getLogger(__name__)

BM25_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")
CONFIG_FILE = "bm25_config.json"
# bm25s's own file names under the sparse folder (arrays are saved with allow_pickle=False).
BM25_FILES = (
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
    "vocab.index.json",
    "params.index.json",
)


@dataclass(frozen=True)
class BM25Config:
    k1: float = option(1.5, help="BM25 term-frequency saturation k1.")
    b: float = option(0.75, help="BM25 length normalisation b.")
    method: str = option("lucene", help="bm25s scoring variant: lucene, robertson, atire, bm25l, bm25+.")
    stopwords: str = option("en", help="Stopword list removed before indexing: 'en' or '' (none).")
    stemmer: str = option("", help="PyStemmer language (e.g. 'english'); '' disables stemming.")

    def __post_init__(self) -> None:
        check(self.k1 >= 0, self, "k1", "must be >= 0")
        check(0 <= self.b <= 1, self, "b", "must be in [0, 1]")
        check(self.method in BM25_METHODS, self, "method", f"known: {', '.join(BM25_METHODS)}")
        check(self.stopwords in ("en", ""), self, "stopwords", "use 'en' or '' (none)")


def _bm25s() -> Any:
    """The bm25s module, with its logger quieted: bm25s sets it to DEBUG on import, so every index build or load would
    print its internal "building index from ids" messages through any handler the application installs."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


def _stemmer(language: str) -> Any:
    if not language:
        return None
    try:
        import Stemmer  # PyStemmer, bm25s's recommended stemmer
    except ImportError as e:
        raise ConfigError("BM25Config", "stemmer", language, "stemming needs PyStemmer: pip install PyStemmer") from e
    try:
        return Stemmer.Stemmer(language)
    except KeyError as e:
        raise ConfigError("BM25Config", "stemmer", language, "PyStemmer knows no such language") from e


class BM25Index:
    """A BM25 index over a list of texts; search returns (row indices, scores) of the best matches."""

    def __init__(self, config: BM25Config | None = None) -> None:
        self.config = config or BM25Config()
        self._stem = _stemmer(self.config.stemmer)
        self._bm25: Any = None

    def _tokenize(self, texts: Sequence[str], show_progress: bool = False) -> list[list[str]]:
        bm25s = _bm25s()

        out = bm25s.tokenize(
            list(texts),
            stopwords=self.config.stopwords or None,
            stemmer=self._stem,
            return_ids=False,
            show_progress=show_progress,
        )
        return [list(toks) for toks in out]

    def build(self, texts: Sequence[str], show_progress: bool = False) -> BM25Index:
        """Index ``texts`` (row i of the index is ``texts[i]``)."""
        bm25s = _bm25s()

        if not texts:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        bm = bm25s.BM25(k1=self.config.k1, b=self.config.b, method=self.config.method)
        tokenized = bm25s.tokenize(  # ids + vocab: bm25s indexes them without re-mapping strings (2x faster build)
            list(texts),
            stopwords=self.config.stopwords or None,
            stemmer=self._stem,
            return_ids=True,
            show_progress=show_progress,
        )
        bm.index(tokenized, show_progress=show_progress)
        self._bm25 = bm
        return self

    @property
    def n_docs(self) -> int:
        return int(self._require().scores["num_docs"])

    def _require(self) -> Any:
        if self._bm25 is None:
            raise RuntimeError("BM25Index is empty: call build() or load() first")
        return self._bm25

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``, shape (n_docs,); all zeros when no query term is indexed."""
        bm = self._require()
        ids = bm.get_tokens_ids(self._tokenize([query])[0])
        if not ids:
            return np.zeros(self.n_docs, dtype=np.float32)
        return np.asarray(bm.get_scores_from_ids(ids))

    def search(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows by BM25, best first, only rows scoring > 0 (a query matching nothing gives empty arrays)."""
        s = self.scores(query)
        k = min(k, s.shape[0])
        top = np.argpartition(-s, k - 1)[:k] if k < s.shape[0] else np.arange(s.shape[0])
        top = top[np.lexsort((top, -s[top]))]  # score descending, row ascending on ties: deterministic
        top = top[s[top] > 0]
        return top.astype(np.int64), s[top].astype(np.float32)

    def save(self, folder: str | Path) -> list[Path]:
        """Write bm25s's npy/json files plus our config; returns the files written."""
        d = Path(folder)
        d.mkdir(parents=True, exist_ok=True)
        self._require().save(str(d), allow_pickle=False)
        (d / CONFIG_FILE).write_text(json.dumps(asdict(self.config), indent=1), encoding="utf-8")
        return [d / f for f in (*BM25_FILES, CONFIG_FILE)]

    @classmethod
    def load(cls, folder: str | Path, mmap: bool = False) -> BM25Index:
        """Read an index written by :meth:`save` (arrays loaded with ``allow_pickle=False``)."""
        bm25s = _bm25s()

        d = Path(folder)
        missing = [f for f in (*BM25_FILES, CONFIG_FILE) if not (d / f).is_file()]
        if missing:
            raise IndexMismatchError(f"BM25 index {d} is incomplete: missing {', '.join(missing)}")
        try:
            config = BM25Config(**json.loads((d / CONFIG_FILE).read_text(encoding="utf-8")))
        except (json.JSONDecodeError, TypeError, ConfigError) as e:
            raise IndexMismatchError(f"{d / CONFIG_FILE}: unreadable BM25 settings: {e}") from e
        out = cls(config)
        try:
            out._bm25 = bm25s.BM25.load(str(d), mmap=mmap, allow_pickle=False, load_corpus=False)
        except (ValueError, OSError, json.JSONDecodeError) as e:
            raise IndexMismatchError(f"BM25 index {d} is corrupt: {e}") from e
        return out
