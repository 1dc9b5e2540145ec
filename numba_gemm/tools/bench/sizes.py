"""GEMM sizes on the command line (``--sizes``, ``--overhead-sizes``) and names for them."""

from __future__ import annotations

import re

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


#: The shape suite (``--suite``): issue 9's list, by group, ``(M, N, K)``.
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
