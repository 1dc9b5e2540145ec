"""GEMM sizes on the command line (``--sizes``, ``--overhead-sizes``) and names for them."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Sequence

SIZE_FORMS = (
    "accepted forms, comma-separated: A..B (every power of two from A to B, both powers of two, "
    "A <= B, e.g. 128..4096), N (square N x N x N, e.g. 1000), MxNxK (e.g. 4096x1024x512)"
)


def _positive_int(text: str, item: str) -> int:
    if not re.fullmatch(r"[0-9]+", text):
        raise ValueError(f"bad size {item!r}: {text!r} is not a positive integer; {SIZE_FORMS}")
    n = int(text)
    if n <= 0:
        raise ValueError(f"bad size {item!r}: dimensions must be >= 1; {SIZE_FORMS}")
    return n


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def parse_sizes(spec: str) -> list[tuple[int, int, int]]:
    """GEMM shapes ``(M, N, K)`` from a ``--sizes`` spec, in order, duplicates dropped.

    ``"128..512"`` -> ``[(128,)*3, (256,)*3, (512,)*3]``; ``"1000"`` -> ``[(1000, 1000, 1000)]``;
    ``"4096x1024x512"`` -> ``[(4096, 1024, 512)]``; items joined by commas, spaces allowed.

    Raises:
        ValueError: an empty spec or item, a non-integer, zero or negative dimension, an ``A..B``
            whose ends are not powers of two or with ``A > B``, or an ``MxNxK`` without exactly
            three dimensions; the message names the bad item and the accepted forms.
    """
    if not spec.strip():
        raise ValueError(f"empty size spec; {SIZE_FORMS}")
    sizes: list[tuple[int, int, int]] = []
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            raise ValueError(f"empty item in size spec {spec!r}; {SIZE_FORMS}")
        if ".." in item:
            lo, _, hi = item.partition("..")
            a, b = _positive_int(lo.strip(), item), _positive_int(hi.strip(), item)
            if not (_is_pow2(a) and _is_pow2(b)):
                raise ValueError(
                    f"bad size range {item!r}: both ends must be powers of two; {SIZE_FORMS}"
                )
            if a > b:
                raise ValueError(f"bad size range {item!r}: start {a} > end {b}; {SIZE_FORMS}")
            new = [(n, n, n) for n in (2**e for e in range(a.bit_length() - 1, b.bit_length()))]
        elif "x" in item.lower():
            dims = item.lower().split("x")
            if len(dims) != 3:
                raise ValueError(
                    f"bad size {item!r}: MxNxK needs exactly 3 dimensions, got {len(dims)}; "
                    f"{SIZE_FORMS}"
                )
            M, N, K = (_positive_int(d.strip(), item) for d in dims)
            new = [(M, N, K)]
        else:
            n = _positive_int(item, item)
            new = [(n, n, n)]
        sizes += [s for s in new if s not in sizes]
    return sizes


def read_sizes(spec: str) -> list[tuple[int, int, int]]:
    """:func:`parse_sizes` of ``spec``, or of the lines of the file named ``spec`` (one or more
    items a line, joined; ``#`` starts a comment; blank lines skipped), e.g. a model's
    projections.

    Raises:
        ValueError: as :func:`parse_sizes`, also for a file with no size in it.
    """
    from pathlib import Path

    path = Path(spec)
    if path.is_file():
        lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
        spec = ",".join(x.strip() for line in lines for x in line.split(",") if x.strip())
        if not spec:
            raise ValueError(f"no size in {path}; one or more a line, {SIZE_FORMS}")
    return parse_sizes(spec)


#: Projection GEMMs of two models, ``(layer, in_features, out_features)``: a token batch of M
#: rows times the layer's weight is an ``M x out x in`` product. GPT-2 small (Radford et al.
#: 2019; d_model 768, MLP 3072, vocabulary 50257) and Llama 3 8B (Meta 2024; d_model 4096, 8 KV
#: heads of 128 -> fused QKV 4096 + 2 * 1024, MLP 14336 with gate and up fused).
MODEL_LAYERS = {
    "gpt2": (
        ("qkv", 768, 2304),
        ("attn_out", 768, 768),
        ("mlp_up", 768, 3072),
        ("mlp_down", 3072, 768),
        ("lm_head", 768, 50257),
    ),
    "llama3-8b": (
        ("qkv", 4096, 6144),
        ("attn_out", 4096, 4096),
        ("gate_up", 4096, 28672),
        ("mlp_down", 14336, 4096),
    ),
}
#: Tokens per batch for the model GEMMs: decoding one and 16 sequences, prefill of 256 and 4096.
MODEL_TOKENS = (1, 16, 256, 4096)


#: Held-out problems: never swept, folded, tuned or used to set a threshold; they judge the plan
#: on shapes it has not seen (``python -m numba_gemm.tools.shapes --heldout``). The models'
#: projections, ``(layer, in_features, out_features)``, of five models no measurement here used:
#: Qwen2.5-7B (d_model 3584, 28 query heads and 4 KV heads of 128, MLP 18944), Gemma 2 9B (3584,
#: 16 query and 8 KV heads of 256, MLP 14336), Phi-3-mini (3072, fused QKV 9216, MLP 8192),
#: Falcon-7B (4544, multi-query: QKV 4544 + 2 * 64, MLP 18176), OPT-1.3B (2048, MLP 8192); each
#: model's fused QKV, attention output, gate/up (or up) and down projections, as published in its
#: Hugging Face ``config.json``.
HELDOUT_LAYERS = {
    "qwen2.5-7b": (
        ("qkv", 3584, 4608),
        ("attn_out", 3584, 3584),
        ("gate_up", 3584, 37888),
        ("mlp_down", 18944, 3584),
    ),
    "gemma2-9b": (
        ("qkv", 3584, 8192),
        ("attn_out", 4096, 3584),
        ("gate_up", 3584, 28672),
        ("mlp_down", 14336, 3584),
    ),
    "phi3-mini": (
        ("qkv", 3072, 9216),
        ("attn_out", 3072, 3072),
        ("gate_up", 3072, 16384),
        ("mlp_down", 8192, 3072),
    ),
    "falcon-7b": (
        ("qkv", 4544, 4672),
        ("attn_out", 4544, 4544),
        ("mlp_up", 4544, 18176),
        ("mlp_down", 18176, 4544),
    ),
    "opt-1.3b": (
        ("qkv", 2048, 6144),
        ("attn_out", 2048, 2048),
        ("mlp_up", 2048, 8192),
        ("mlp_down", 8192, 2048),
    ),
}
#: Tokens of the held-out model products (none of the suite's 1, 16, 256, 4096).
HELDOUT_TOKENS = (8, 128, 2000)

#: A second held-out model set, chosen on 2026-11-27 before anything was measured on it, once the
#: first had been looked at too often to judge a change cleanly (its failures shaped later work):
#: Mistral-NeMo 12B (d_model 5120, 32 query and 8 KV heads of 128, MLP 14336), StableLM 2 1.6B
#: (2048, 32 heads of 64, MLP 5632), Qwen2-1.5B (1536, 12 query and 2 KV heads of 128, MLP 8960),
#: GPT-J 6B (4096, MLP 16384), MiniCPM-2B (2304, 36 heads of 64, MLP 5760); layers as in
#: :data:`HELDOUT_LAYERS`, from each model's Hugging Face ``config.json``.
HELDOUT_LAYERS_2 = {
    "mistral-nemo-12b": (
        ("qkv", 5120, 6144),
        ("attn_out", 4096, 5120),
        ("gate_up", 5120, 28672),
        ("mlp_down", 14336, 5120),
    ),
    "stablelm2-1.6b": (
        ("qkv", 2048, 6144),
        ("attn_out", 2048, 2048),
        ("gate_up", 2048, 11264),
        ("mlp_down", 5632, 2048),
    ),
    "qwen2-1.5b": (
        ("qkv", 1536, 2048),
        ("attn_out", 1536, 1536),
        ("gate_up", 1536, 17920),
        ("mlp_down", 8960, 1536),
    ),
    "gpt-j-6b": (
        ("qkv", 4096, 12288),
        ("attn_out", 4096, 4096),
        ("mlp_up", 4096, 16384),
        ("mlp_down", 16384, 4096),
    ),
    "minicpm-2b": (
        ("qkv", 2304, 6912),
        ("attn_out", 2304, 2304),
        ("gate_up", 2304, 11520),
        ("mlp_down", 5760, 2304),
    ),
}
#: Tokens of the second set's products (none of the suite's nor the first set's).
HELDOUT_TOKENS_2 = (24, 320, 1500)
#: A third held-out model set, chosen on 2026-11-28 before anything was measured on it, to judge
#: the wider split-K options (docs/design.md §4.13) on products neither earlier set had shaped:
#: Llama-3.2-3B (d_model 3072, 24 query and 8 KV heads of 128, MLP 8192), Yi-6B (4096, 32 query
#: and 4 KV heads of 128, MLP 11008), Phi-2 (2560, 32 heads of 80, MLP 10240, no gate), Gemma-2B
#: (2048, 8 query heads and 1 KV head of 256, MLP 16384), TinyLlama-1.1B (2048, 32 query and 4 KV
#: heads of 64, MLP 5632); layers as in :data:`HELDOUT_LAYERS`.
HELDOUT_LAYERS_3 = {
    "llama3.2-3b": (
        ("qkv", 3072, 5120),
        ("attn_out", 3072, 3072),
        ("gate_up", 3072, 16384),
        ("mlp_down", 8192, 3072),
    ),
    "yi-6b": (
        ("qkv", 4096, 5120),
        ("attn_out", 4096, 4096),
        ("gate_up", 4096, 22016),
        ("mlp_down", 11008, 4096),
    ),
    "phi-2": (
        ("qkv", 2560, 7680),
        ("attn_out", 2560, 2560),
        ("mlp_up", 2560, 10240),
        ("mlp_down", 10240, 2560),
    ),
    "gemma-2b": (
        ("qkv", 2048, 2560),
        ("attn_out", 2048, 2048),
        ("gate_up", 2048, 32768),
        ("mlp_down", 16384, 2048),
    ),
    "tinyllama-1.1b": (
        ("qkv", 2048, 2560),
        ("attn_out", 2048, 2048),
        ("gate_up", 2048, 11264),
        ("mlp_down", 5632, 2048),
    ),
}
#: Tokens of the third set's products (none of the suite's nor the earlier sets').
HELDOUT_TOKENS_3 = (48, 200, 1000)
#: The held-out random problems' seed (fixed so that runs compare; drawn once, never tuned on).
HELDOUT_SEED = 20261126


def heldout_random(count: int = 40, seed: int = HELDOUT_SEED) -> list[tuple[int, int, int, str]]:
    """``count`` random problems ``(M, N, K, layout)``: M, N and K each log-uniform in
    ``[1, 23170]``, kept when ``2**18 <= M * N * K <= 2**37``; layout ``"NN"`` or ``"NT"`` (``x @
    W.T``) with equal odds. The same list for the same ``seed``."""
    rng = random.Random(seed)
    out: list[tuple[int, int, int, str]] = []
    while len(out) < count:
        M, N, K = (round(math.exp(rng.uniform(0.0, math.log(23170)))) for _ in range(3))
        layout = rng.choice(("NN", "NT"))
        if 2**18 <= M * N * K <= 2**37:
            out.append((M, N, K, layout))
    return out


#: Seeds of :func:`training_projections` whose timings the committed cost-model fit
#: (``tools.calibrate``) was made from: training data, never a held-out draw.
TRAINING_SEEDS = (101, 102)


#: The rows of :func:`training_projections` by default (those of the committed fit's probe).
TRAINING_ROWS = (24, 3072)


def training_rows(rows: Sequence[int]) -> tuple[int, int]:
    """``rows`` as ``(lo, hi)``, checked: the range :func:`training_projections` draws rows from.

    Raises:
        ValueError: ``rows`` is not two integers with ``8 <= lo <= hi``.
    """
    lo, hi = rows
    if not 8 <= lo <= hi:
        raise ValueError(f"rows must be (lo, hi) with 8 <= lo <= hi, got {tuple(rows)!r}")
    return lo, hi


def training_projections(
    count: int = 40, seed: int = 101, rows: Sequence[int] = TRAINING_ROWS
) -> list[tuple[int, int, int]]:
    """``count`` made-up projection-like products ``(M, N, K)`` for fitting the cost model (a
    training split: no held-out set draws from it): M log-uniform in ``rows`` (default
    :data:`TRAINING_ROWS`) rounded to a multiple of 8, N in ``[1536, 32768]`` and K in
    ``[1536, 16384]`` rounded to multiples of 64, kept when ``M * N * K <= 2**37``. The same
    list for the same ``seed`` and ``rows``.

    Raises:
        ValueError: ``rows`` is not ``(lo, hi)`` with ``8 <= lo <= hi`` (:func:`training_rows`).
    """
    lo, hi = training_rows(rows)
    rng = random.Random(seed)

    def draw(lo: int, hi: int, step: int) -> int:
        x = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        return max(step, int(round(x / step)) * step)

    out: list[tuple[int, int, int]] = []
    while len(out) < count:
        M, N, K = draw(lo, hi, 8), draw(1536, 32768, 64), draw(1536, 16384, 64)
        if M * N * K <= 2**37:
            out.append((M, N, K))
    return out


def heldout_models(which: int = 1) -> list[tuple[str, tuple[int, int, int]]]:
    """``[(model, (M, N, K))]``: each held-out model's projections at each of its set's tokens, as
    ``x @ W.T`` computes them (layout NT); ``which`` (1, 2 or 3): :data:`HELDOUT_LAYERS` at
    :data:`HELDOUT_TOKENS`, :data:`HELDOUT_LAYERS_2` at :data:`HELDOUT_TOKENS_2` or
    :data:`HELDOUT_LAYERS_3` at :data:`HELDOUT_TOKENS_3`.

    Raises:
        ValueError: ``which`` is not 1, 2 or 3.
    """
    sets = {
        1: (HELDOUT_LAYERS, HELDOUT_TOKENS),
        2: (HELDOUT_LAYERS_2, HELDOUT_TOKENS_2),
        3: (HELDOUT_LAYERS_3, HELDOUT_TOKENS_3),
    }
    if which not in sets:
        raise ValueError(f"which must be 1, 2 or 3 (a held-out model set), got {which!r}")
    layers_of, tokens = sets[which]
    return [
        (model, (t, out, k))
        for model, layers in layers_of.items()
        for t in tokens
        for _, k, out in layers
    ]


def _suite() -> dict[str, list[tuple[int, int, int]]]:
    groups = {
        "square": [(n, n, n) for n in (256, 512, 1024, 2048, 4096, 8192)],
        "ragged": [(n, n, n) for n in (1000, 3000, 4095, 4097, 6000)] + [(4097, 1023, 4095)],
        "skinny": [(m, 4096, 4096) for m in (1, 8, 16, 32, 64, 128, 256)]
        + [(4096, n, 4096) for n in (1, 16, 128)],
        "deep": [(1024, 1024, 16384), (256, 256, 65536)],
        "small_k": [(8192, 8192, k) for k in (64, 128, 256)],
    }
    for model, layers in MODEL_LAYERS.items():
        groups[model] = [(t, out, k) for t in MODEL_TOKENS for _, k, out in layers]
    return groups


#: The shape suite (``--suite``): the products the plan is tuned and checked on, by group,
#: ``(M, N, K)``.
SUITE = _suite()


def suite_shapes(groups: list[str] | None = None) -> list[tuple[str, tuple[int, int, int]]]:
    """``[(group, (M, N, K))]`` of the suite (the named ``groups``, default all), in order,
    each shape once (under its first group).

    Raises:
        ValueError: an unknown group name (the valid ones are listed).
    """
    names = list(SUITE) if groups is None else list(groups)
    bad = [g for g in names if g not in SUITE]
    if bad:
        raise ValueError(f"unknown suite group(s) {bad}; valid: {', '.join(SUITE)}")
    seen, out = set(), []
    for g in names:
        for s in SUITE[g]:
            if s not in seen:
                seen.add(s)
                out.append((g, s))
    return out


def size_label(M: int, N: int, K: int) -> str:
    """``"MxNxK"``."""
    return f"{M}x{N}x{K}"


def short_size(M: int, N: int, K: int) -> str:
    """``"N"`` for a square ``N x N x N`` product, else ``"MxNxK"`` (README tables)."""
    return str(M) if M == N == K else size_label(M, N, K)


def gpu_slug(name: str) -> str:
    """Directory-safe GPU name: lowercase, spaces -> ``-``, only ``[a-z0-9._-]`` kept.

    ``"NVIDIA H200"`` -> ``"nvidia-h200"``; ``"simulator"`` stays ``"simulator"``.
    """
    slug = re.sub(r"[^a-z0-9._-]", "", name.strip().lower().replace(" ", "-"))
    return re.sub(r"-{2,}", "-", slug).strip("-") or "unknown-gpu"
