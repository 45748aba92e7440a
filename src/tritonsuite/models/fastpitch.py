"""FastPitch text-to-mel (Łańcucki, 2021), the seed's speech-synthesis deployment, in a compact implementation.

Architecture (inference only): symbol embedding -> FFT encoder (feed-forward transformer: self-attention and a
1-D convolutional feed-forward, post layer norm) -> duration, pitch and energy predictors (two conv layers and a
linear head each) -> pitch and energy embedded back into the encoding -> length regulator (each symbol repeated
for its predicted number of frames) -> FFT decoder -> linear projection to 80 mel bins.

Serving signature (the seed's names): ``INPUT__0`` int64 symbol ids [seq] (dynamic; 0 is padding); outputs
``OUTPUT__0`` mel float32 [80, T], ``OUTPUT__1`` mel length int64 [1], ``OUTPUT__2`` durations int64 [seq] (frames
per symbol), ``OUTPUT__3`` pitch and ``OUTPUT__4`` energy float32 [seq]. Within a batch T is the longest sample's
length; frames past a sample's own length are zero and are not part of its result (``valid_length``).

Durations are integers: ``round(clamp(exp(log_duration) - 1, 0, max_duration))``, zero on padding, so T is at most
``seq * max_duration``.

Text front end: :data:`SYMBOLS` (index = id): ``_`` padding (0), punctuation, space, ``a``-``z``, ``A``-``Z``.
:func:`text_to_ids` refuses other characters. The accuracy set is the bundled English sentences
(``data/fastpitch_sentences.json``) or the user's ``--dataset fastpitch=FILE`` (a ``.txt`` with one sentence per line,
or a ``.json`` list of strings).

Weights: no FastPitch checkpoint can be fetched here, so each size is seeded random, with the duration predictor's
bias set so a symbol gets a few frames (T of a few hundred frames at seq 128) and the mel projection's bias at a
log-mel-like level. ``--checkpoint fastpitch=PATH`` loads a ``state_dict`` of :func:`build_module`'s module (a
``.pt`` from ``torch.save(module.state_dict(), PATH)``) at the profile's size.

Sizes: ``tiny`` (width 48, 1+1 layers; smoke tests), ``cpu`` (width 128, 2+2 layers, filter 512; CPU profiles on 2 cores),
``large`` (the seed's: width 384, 6+6 layers, filter 1536; GPU profiles).
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path

import numpy as np

from tritonsuite.core.spec import AccuracyData, Metric, ModelSpec, TensorSpec
from tritonsuite.models.training import load_weights

PAD = "_"
PUNCTUATION = "!'\"(),-.:;?"
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
SYMBOLS = PAD + PUNCTUATION + " " + LETTERS  # index in this string = symbol id; 0 is padding
SYMBOL_IDS = {s: i for i, s in enumerate(SYMBOLS)}
N_MEL = 80
PERF_SEQ_LEN = 128  # the seed's SEQUENCE_LENGTH
SEED = 20210401
MEL_RANGE = (-15.0, 3.0)  # the seed's sanity check: mel values expected in this range
SENTENCES_FILE = Path(__file__).parent / "data" / "fastpitch_sentences.json"

SIZES = {
    "tiny": {"d_model": 48, "n_heads": 2, "encoder_layers": 1, "decoder_layers": 1, "filter_size": 96,
             "kernel_size": 3, "predictor_filter": 48, "max_duration": 20, "frames_per_symbol": 3.0},
    "cpu": {"d_model": 128, "n_heads": 2, "encoder_layers": 2, "decoder_layers": 2, "filter_size": 512,
            "kernel_size": 3, "predictor_filter": 128, "max_duration": 20, "frames_per_symbol": 2.0},
    "large": {"d_model": 384, "n_heads": 1, "encoder_layers": 6, "decoder_layers": 6, "filter_size": 1536,
              "kernel_size": 3, "predictor_filter": 256, "max_duration": 75, "frames_per_symbol": 5.0},
}

TOLERANCES = {  # (atol, rtol); mel is compared over each sample's valid frames only
    "fp32": {"OUTPUT__0": (1e-3, 1e-3), "OUTPUT__1": (0.0, 0.0), "OUTPUT__2": (0.0, 0.0),
             "OUTPUT__3": (1e-4, 1e-4), "OUTPUT__4": (1e-4, 1e-4)},
    # fp16, judged against fp32 as a listener would (docs/precision.md): each symbol's duration within one frame, the
    # total length within 2%; the mel tensor element by element is informational (share 1: a duration one frame
    # longer shifts every later frame), the score compares mel where durations agree
    "fp16": {"OUTPUT__0": (0.1, 0.05, 1.0), "OUTPUT__1": (0.0, 0.02), "OUTPUT__2": (1.0, 0.0),
             "OUTPUT__3": (2e-2, 2e-2), "OUTPUT__4": (2e-2, 2e-2)},
}
# share of samples whose lengths and durations must equal the reference's, per precision
EXACT_SHARE = {"fp32": 1.0, "fp16": 0.9}
# reduced precision: at most this share of all symbols may take a duration other than fp32's (each within a frame)
CHANGED_DURATION_SHARE = 0.05
MEL_IN_RANGE_SHARE = 0.99  # the seed's sanity metric threshold: share of valid mel values within MEL_RANGE


# --------------------------------------------------------------------------------------------- text front end
def text_to_ids(text: str) -> list[int]:
    """Symbol ids of ``text``; a character outside :data:`SYMBOLS` is a one-line ValueError naming it."""
    unknown = sorted({c for c in text if c not in SYMBOL_IDS or c == PAD})
    if unknown:
        raise ValueError(f"text {text[:40]!r} has characters {''.join(unknown)!r} outside the symbol table; "
                         f"valid choices: {SYMBOLS[1:]!r}")
    return [SYMBOL_IDS[c] for c in text]


def ids_to_text(ids: Sequence[int]) -> str:
    """The text of symbol ids, padding dropped."""
    return "".join(SYMBOLS[int(i)] for i in ids if int(i) != 0)


def encode_texts(texts: Sequence[str], length: int | None = None) -> np.ndarray:
    """Symbol ids of ``texts`` as int64 [len(texts), length], padded with 0 (length: the longest text's)."""
    encoded = [text_to_ids(t) for t in texts]
    width = max(map(len, encoded), default=0) if length is None else length
    too_long = [t for t, e in zip(texts, encoded) if len(e) > width]
    if too_long:
        raise ValueError(f"text {too_long[0][:40]!r}... is longer than {width} symbols")
    ids = np.zeros((len(texts), width), np.int64)
    for row, e in zip(ids, encoded):
        row[:len(e)] = e
    return ids


def load_sentences(path: Path | None = None) -> list[str]:
    """Sentences from a ``.json`` list of strings or a ``.txt`` file with one sentence per line."""
    path = Path(path) if path is not None else SENTENCES_FILE
    if not path.is_file():
        raise ValueError(f"--dataset fastpitch={path}: no such file")
    if path.suffix == ".json":
        sentences = json.loads(path.read_text(encoding="utf-8"))
    elif path.suffix == ".txt":
        sentences = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    else:
        raise ValueError(f"--dataset fastpitch={path}: unknown suffix {path.suffix!r}; valid choices: .json, .txt")
    sentences = [s for s in sentences if s]
    if not sentences or not all(isinstance(s, str) for s in sentences):
        raise ValueError(f"--dataset fastpitch={path}: expected a non-empty list of sentences")
    return sentences


# --------------------------------------------------------------------------------------------- the network
@cache
def _classes():  # defined lazily so importing this module does not import torch
    import torch
    from torch import nn

    # A trace records a device as a constant (torch.arange's, and any .to()'s, even .to(a tensor)): an fp32 export
    # traced on the CPU then failed every request on a KIND_GPU instance ("Expected all tensors to be on the same
    # device", measured on an H200, 2026-11-30). So the forward passes build index tensors from their inputs alone
    # (ones_like, repeat_interleave), and the frequencies are a buffer, which moves with the module.
    def steps(like: torch.Tensor) -> torch.Tensor:
        """0, 1, ..., len(like) - 1 (long) on ``like``'s device, however the module was traced."""
        return torch.ones_like(like, dtype=torch.long).cumsum(0) - 1

    def sinusoid(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
        angles = positions.float()[:, None] * inv_freq[None, :]
        return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)

    class SelfAttention(nn.Module):
        def __init__(self, d_model: int, n_heads: int):
            super().__init__()
            self.n_heads, self.d_head = n_heads, d_model // n_heads
            self.qkv = nn.Linear(d_model, 3 * d_model)
            self.out = nn.Linear(d_model, d_model)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            b, n, d = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4).unbind(0)
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d_head)
            # padded keys weigh 0: -1e9, or in half the most negative half (-1e9 overflows it)
            scores = scores.masked_fill(~mask[:, None, None, :], -65504.0 if scores.dtype == torch.float16 else -1e9)
            context = torch.matmul(torch.softmax(scores, dim=-1), v)
            return self.out(context.transpose(1, 2).reshape(b, n, d))

    class ConvFeedForward(nn.Module):
        def __init__(self, d_model: int, filter_size: int, kernel_size: int):
            super().__init__()
            self.conv1 = nn.Conv1d(d_model, filter_size, kernel_size, padding=kernel_size // 2)
            self.conv2 = nn.Conv1d(filter_size, d_model, kernel_size, padding=kernel_size // 2)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            # the hidden layer is zeroed on padding too, so conv2 sees what its zero padding gives an unpadded text
            hidden = torch.relu(self.conv1(x.transpose(1, 2))) * mask.unsqueeze(1).to(x.dtype)
            return self.conv2(hidden).transpose(1, 2)

    class FFTLayer(nn.Module):
        def __init__(self, d_model: int, n_heads: int, filter_size: int, kernel_size: int):
            super().__init__()
            self.attention = SelfAttention(d_model, n_heads)
            self.norm1 = nn.LayerNorm(d_model)
            self.feed_forward = ConvFeedForward(d_model, filter_size, kernel_size)
            self.norm2 = nn.LayerNorm(d_model)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            keep = mask.unsqueeze(-1).to(x.dtype)
            x = self.norm1(x + self.attention(x, mask)) * keep
            return self.norm2(x + self.feed_forward(x, mask)) * keep  # padding stays 0, as the next conv's zero padding

    class FFTransformer(nn.Module):
        """A stack of FFT layers over [B, N, d] with sinusoidal positions; positions past ``mask`` stay zero."""

        def __init__(self, n_layers: int, d_model: int, n_heads: int, filter_size: int, kernel_size: int):
            super().__init__()
            self.d_model = d_model
            inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
            self.register_buffer("inv_freq", inv_freq, persistent=False)
            self.layers = nn.ModuleList([FFTLayer(d_model, n_heads, filter_size, kernel_size)
                                         for _ in range(n_layers)])

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            positions = steps(mask[0])
            x = (x + sinusoid(positions, self.inv_freq).to(x.dtype)[None]) * mask.unsqueeze(-1).to(x.dtype)
            for layer in self.layers:
                x = layer(x, mask)
            return x

    class TemporalPredictor(nn.Module):
        """Two conv + ReLU + layer-norm blocks and a linear head: one value per symbol (0 on padding)."""

        def __init__(self, d_model: int, filter_size: int, kernel_size: int, bias: float = 0.0):
            super().__init__()
            self.conv1 = nn.Conv1d(d_model, filter_size, kernel_size, padding=kernel_size // 2)
            self.norm1 = nn.LayerNorm(filter_size)
            self.conv2 = nn.Conv1d(filter_size, filter_size, kernel_size, padding=kernel_size // 2)
            self.norm2 = nn.LayerNorm(filter_size)
            self.head = nn.Linear(filter_size, 1)
            with torch.no_grad():
                self.head.bias.fill_(bias)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            keep = mask.unsqueeze(-1).to(x.dtype)
            x = self.norm1(torch.relu(self.conv1(x.transpose(1, 2))).transpose(1, 2)) * keep
            x = self.norm2(torch.relu(self.conv2(x.transpose(1, 2))).transpose(1, 2)) * keep
            return self.head(x).squeeze(-1) * mask.to(x.dtype)

    class FastPitch(nn.Module):
        """Text ids [B, N] (0 = padding) -> (mel [B, 80, T], lengths [B, 1], durations, pitch, energy [B, N])."""

        def __init__(self, n_symbols: int, d_model: int, n_heads: int, encoder_layers: int, decoder_layers: int,
                     filter_size: int, kernel_size: int, predictor_filter: int, max_duration: int,
                     frames_per_symbol: float, n_mel: int = N_MEL):
            super().__init__()
            self.max_duration = float(max_duration)
            self.embedding = nn.Embedding(n_symbols, d_model, padding_idx=0)
            self.encoder = FFTransformer(encoder_layers, d_model, n_heads, filter_size, kernel_size)
            # log(1 + frames): a symbol starts at about ``frames_per_symbol`` frames
            self.duration_predictor = TemporalPredictor(d_model, predictor_filter, kernel_size,
                                                        bias=math.log(1.0 + frames_per_symbol))
            self.pitch_predictor = TemporalPredictor(d_model, predictor_filter, kernel_size)
            self.energy_predictor = TemporalPredictor(d_model, predictor_filter, kernel_size)
            self.pitch_embedding = nn.Conv1d(1, d_model, kernel_size, padding=kernel_size // 2)
            self.energy_embedding = nn.Conv1d(1, d_model, kernel_size, padding=kernel_size // 2)
            self.decoder = FFTransformer(decoder_layers, d_model, n_heads, filter_size, kernel_size)
            self.projection = nn.Linear(d_model, n_mel)
            with torch.no_grad():
                self.projection.bias.fill_(-5.0)  # log-mel-like level for random weights

        def forward(self, text: torch.Tensor):
            mask = text != 0
            keep = mask.unsqueeze(-1)
            encoded = self.encoder(self.embedding(text), mask)
            log_duration = self.duration_predictor(encoded, mask)
            durations = torch.clamp(torch.exp(log_duration.float()) - 1.0, 0.0, self.max_duration)
            durations = torch.round(durations).long() * mask.long()
            pitch = self.pitch_predictor(encoded, mask)
            # embeddings have a bias: re-mask so padding stays zero for the next predictor's convolution
            encoded = (encoded + self.pitch_embedding(pitch.unsqueeze(1)).transpose(1, 2)) * keep.to(encoded.dtype)
            energy = self.energy_predictor(encoded, mask)
            encoded = (encoded + self.energy_embedding(energy.unsqueeze(1)).transpose(1, 2)) * keep.to(encoded.dtype)
            frames, lengths = self.regulate_length(encoded, durations)
            frame_mask = steps(frames[0, :, 0])[None, :] < lengths[:, None]
            decoded = self.decoder(frames, frame_mask)
            mel = self.projection(decoded) * frame_mask.unsqueeze(-1).to(decoded.dtype)
            return mel.transpose(1, 2), lengths.unsqueeze(1), durations, pitch, energy

        @staticmethod
        def regulate_length(encoded: torch.Tensor, durations: torch.Tensor):
            """Repeat each symbol's encoding for its duration: ([B, T, d] with T the longest, lengths [B]).

            Frame t of a sample takes the symbol whose cumulative-duration interval [start, end) holds t,
            written as a 0/1 matrix product so the frame count stays a traced value (no Python ints).
            """
            ends = torch.cumsum(durations, dim=1)  # [B, N]
            starts = ends - durations
            lengths = ends[:, -1]
            longest = torch.repeat_interleave(torch.ones_like(lengths[:1]), lengths.max().reshape(1))  # T ones
            t = steps(longest)[None, :, None]  # [1, T, 1]
            select = (starts[:, None, :] <= t) & (t < ends[:, None, :])  # [B, T, N]
            return torch.matmul(select.to(encoded.dtype), encoded), lengths

    return FastPitch


def build_module(size: str, checkpoint: Path | None = None):
    """The eval-mode FastPitch module of ``size``: seeded random weights, or the user's state_dict."""
    import torch

    if size not in SIZES:
        raise ValueError(f"unknown fastpitch size {size!r}; valid choices: {', '.join(SIZES)}")
    torch.manual_seed(SEED)
    module = _classes()(len(SYMBOLS), **SIZES[size])
    if checkpoint is not None:
        load_weights(module, checkpoint, f"fastpitch:{size}")
    return module.eval()


# --------------------------------------------------------------------------------------------- inputs
def _example_inputs(batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Length-128 ids for performance runs: bundled sentences, chosen by ``seed``, joined until they fill 128."""
    rng = np.random.default_rng(seed)
    sentences = load_sentences()
    rows = []
    for _ in range(batch_size):
        text = ""
        while len(text) < PERF_SEQ_LEN:
            text += sentences[int(rng.integers(len(sentences)))] + " "
        rows.append(text[:PERF_SEQ_LEN])
    return {"INPUT__0": encode_texts(rows, PERF_SEQ_LEN)}


def _verification_inputs() -> list[dict[str, np.ndarray]]:
    """Batches at other text lengths and batch sizes than the traced one (128 x 2), each with padded samples."""
    sentences = load_sentences()
    batches = []
    for length, batch_size in ((9, 1), (40, 3), (77, 5), (200, 2)):
        rng = np.random.default_rng(length)
        texts = []
        for i in range(batch_size):
            text = ""
            while len(text) < length:
                text += sentences[int(rng.integers(len(sentences)))] + " "
            keep = length if i == 0 else int(rng.integers(max(1, length // 3), length + 1))
            texts.append(text[:keep].rstrip() or text[0])
        batches.append({"INPUT__0": encode_texts(texts, length)})
    return batches


# --------------------------------------------------------------------------------------------- accuracy
def _valid_mel(outputs: Mapping[str, np.ndarray], i: int) -> np.ndarray:
    return outputs["OUTPUT__0"][i, :, :int(outputs["OUTPUT__1"][i, 0])]


def _reduced_precision_metrics(served, reference, sentences, exact, mel_ok, worst_error, name) -> list[Metric]:
    """fp16 against fp32: the share of symbols whose duration changed (each is within a frame by the OUTPUT__2
    tolerance), and mel where durations agree: within tolerance on the sentences whose durations all equal fp32's
    (with a duration changed, every later frame shifts; those sentences are judged by their durations)."""
    changed = total = 0
    worst_changed, worst_share = 0, -1.0
    for i, sentence in enumerate(sentences):
        n = len(sentence)
        diff = int(np.sum(served["OUTPUT__2"][i, :n] != reference["OUTPUT__2"][i, :n]))
        changed, total = changed + diff, total + n
        if diff / max(n, 1) > worst_share:
            worst_changed, worst_share = i, diff / max(n, 1)
    aligned = [i for i, same in enumerate(exact) if same]
    aligned_ok = [mel_ok[i] for i in aligned]
    worst_aligned = max(aligned, key=lambda i: worst_error[i], default=None)
    return [
        Metric("durations_changed_share", changed / max(total, 1), CHANGED_DURATION_SHARE, higher_is_better=False,
               worst=f"{name(worst_changed)}: {worst_share:.3f} of its symbols ({changed}/{total} over all)"),
        Metric("mel_where_durations_agree_within_tolerance_share", float(np.mean(aligned_ok)) if aligned else 0.0,
               1.0, worst="no sentence kept every duration" if worst_aligned is None else
               f"{name(worst_aligned)}: max abs error {worst_error[worst_aligned]:.3g} "
               f"({len(aligned)}/{len(exact)} sentences kept every duration)"),
    ]


def _accuracy_data(size: str, dataset: Path | None, checkpoint: Path | None) -> AccuracyData:
    sentences = load_sentences(dataset)
    inputs = {"INPUT__0": encode_texts(sentences)}

    def name(i: int) -> str:
        return f"sentence {i} ({sentences[i][:50]!r})"

    def score(served: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], precision: str) -> list[Metric]:
        atol, rtol = TOLERANCES.get(precision, TOLERANCES["fp32"])["OUTPUT__0"][:2]
        exact, mel_ok, in_range, worst_error = [], [], [], []
        for i in range(len(sentences)):
            same = (np.array_equal(served["OUTPUT__1"][i], reference["OUTPUT__1"][i])
                    and np.array_equal(served["OUTPUT__2"][i], reference["OUTPUT__2"][i]))
            exact.append(same)
            s, r = _valid_mel(served, i), _valid_mel(reference, i)
            if s.shape == r.shape:
                error = np.abs(s.astype(np.float64) - r)
                mel_ok.append(bool((error <= atol + rtol * np.abs(r)).all()))
                worst_error.append(float(error.max(initial=0.0)))
            else:
                mel_ok.append(False)
                worst_error.append(float("inf"))
            in_range.append(float(np.mean((s >= MEL_RANGE[0]) & (s <= MEL_RANGE[1]))) if s.size else 0.0)
        first_miss = next((i for i, ok in enumerate(exact) if not ok), None)
        worst_mel = int(np.argmax(worst_error))
        worst_range = int(np.argmin(in_range))
        share = EXACT_SHARE.get(precision, 1.0)
        range_metric = Metric("mel_in_range_share", float(np.mean(in_range)), MEL_IN_RANGE_SHARE,
                              worst=f"{name(worst_range)}: {in_range[worst_range]:.4f} of its mel values in "
                                    f"[{MEL_RANGE[0]:g}, {MEL_RANGE[1]:g}]")
        if precision != "fp32":
            return _reduced_precision_metrics(served, reference, sentences, exact, mel_ok, worst_error, name) + \
                [range_metric]
        return [
            Metric("lengths_and_durations_equal_share", float(np.mean(exact)), share,
                   worst="" if first_miss is None else
                   f"{name(first_miss)}: length {served['OUTPUT__1'][first_miss, 0]}, reference "
                   f"{reference['OUTPUT__1'][first_miss, 0]}"),
            Metric("mel_valid_frames_within_tolerance_share", float(np.mean(mel_ok)), share,
                   worst=f"{name(worst_mel)}: max abs error {worst_error[worst_mel]:.3g} (atol {atol:g}, rtol {rtol:g})"),
            range_metric,
        ]

    lengths = [len(s) for s in sentences]
    source = dataset or "the bundled English sentences"
    return AccuracyData(inputs=inputs, score=score,
                        description=f"{len(sentences)} sentences from {source}, {min(lengths)}-{max(lengths)} symbols "
                                    f"(padded to {inputs['INPUT__0'].shape[1]})")


def make_spec(size: str) -> ModelSpec:
    cfg = SIZES[size]
    max_frames = PERF_SEQ_LEN * cfg["max_duration"]  # bound of T at the perf length (durations are clamped)
    return ModelSpec(
        title="FastPitch",
        name="fastpitch",
        size=size,
        build=lambda checkpoint=None: build_module(size, checkpoint),
        inputs=(TensorSpec("INPUT__0", "int64", (-1,)),),
        outputs=(TensorSpec("OUTPUT__0", "float32", (N_MEL, -1), max_shape=(N_MEL, max_frames),
                            valid_length=("OUTPUT__1", 1)),
                 TensorSpec("OUTPUT__1", "int64", (1,)),
                 TensorSpec("OUTPUT__2", "int64", (-1,), max_shape=(PERF_SEQ_LEN,)),
                 TensorSpec("OUTPUT__3", "float32", (-1,), max_shape=(PERF_SEQ_LEN,)),
                 TensorSpec("OUTPUT__4", "float32", (-1,), max_shape=(PERF_SEQ_LEN,))),
        example_inputs=_example_inputs,
        formats=("ts-trace", "ts-script", "onnx"),
        precisions=("fp32", "fp16"),
        tolerances=TOLERANCES,
        accuracy_data=lambda dataset=None, checkpoint=None: _accuracy_data(size, dataset, checkpoint),
        config={**cfg, "symbols": SYMBOLS, "seed": SEED, "n_mel": N_MEL},
        weights_files=list,
        parameters={"Sequence Length": PERF_SEQ_LEN},
        stream={"output": "OUTPUT__0", "axis": 2, "size": 32, "length": "OUTPUT__1"},  # mel, 32 frames a response
        verification_inputs=_verification_inputs,
        description=(f"FastPitch, width {cfg['d_model']}, {cfg['encoder_layers']}+{cfg['decoder_layers']} FFT layers, "
                     f"filter {cfg['filter_size']}, {N_MEL} mel bins"),
    )


SPECS = [make_spec(size) for size in SIZES]
