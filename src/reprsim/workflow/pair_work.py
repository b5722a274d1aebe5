"""What a pair job's measures must compute, counted: FLOPs and bytes of every primitive of each measure's value,
permutation null and half-sample interval routes (reprsim.metrics.prepared, docs/numerics.md §9.4), and of one
model's terms (rule model_terms), for given shapes.

The floor of a primitive is the least time this machine could take for it: max(FLOPs / matmul rate, bytes /
memory bandwidth), the rates measured by benchmarks/pair_floor.py (float64, one thread); a route's floor is the
sum over its primitives. The same benchmark measures each measure's achieved time over its floor at the default
configuration's shape and at word level; `reprsim plan` prices a pair job as floor × that ratio (ACHIEVED), so
its estimates rest on measured rates, not assumed ones. Standard library only (the rules load it).

Shapes: model x has Lx layers of width dx, model y Ly of dy; n rows; P permutations; R half-samples of m = n // 2.
Every count is float64 (8 bytes an element). A second CKA measure of the same kernel in one job reuses the
first's products (both estimators come from the same inner products): `shared` counts it as free.
"""

from __future__ import annotations

from collections.abc import Mapping

W = 8  # bytes of a float64
# measured by benchmarks/pair_floor.py on this project's 2-core machine (README, "Pair jobs against their floor"):
# one core's float64 matrix-product rate, its streaming memory rate (read + write), and per family the achieved
# time of a pair job's share of a measure over its floor, and of one model's terms over theirs (the largest of the
# default's and the word level's)
CORE_FLOPS = 3.84e10
CORE_BANDWIDTH = 9.5e9
ACHIEVED = {"gram": 4.3, "basis": 3.4, "neighbours": 5.7, "neuronsim": 1.7, "recompute": 2.8}
TERMS_ACHIEVED = {"gram": 3.0, "rbf": 4.6, "basis": 2.0, "neighbours": 1.6}
# a model's centred Grams (L, n, n) are stored in its terms up to this size: larger ones cost more disk than the
# one product per layer that rebuilds them (7 layers of 1,921 words: 207 MB a model, 0.5 s to rebuild)
GRAM_STORE_BYTES = 64 << 20
DEFAULT_MEMORY_GB = 8.0  # similarity.max_memory_gb when the config names none (reprsim.metrics.memory.DEFAULT_GB)
# A pair job on a GPU (similarity.device: cuda): what does not grow with the rows (kernel launches, synchronisations,
# transfers, the small decompositions: reprsim.metrics.cca.SMALL_ON_HOST) costs GPU_DRAW_SECONDS per draw (1 + P + R)
# and layer pair of each measure, and the arithmetic runs GPU_SPEEDUP times as fast as the one-core estimate
# (:func:`measure_seconds`); a model's terms likewise, per half-sample and layer. benchmarks/pair_devices.py fits
# both to a pair job's seconds on a GPU at two row counts (:func:`fit_gpu`) and prints them; GPU_MEASURED holds the
# seconds of its last run (docs/benchmarks.md, "On a GPU"): the default's pair job (7 x 5 layers, 274 draws), its draws
# batched, on one H200 (the H100's 4.2 s and 4.4 s of 2026-11-26 were before the batching).
GPU_MEASURED = {"device": "NVIDIA H200", "date": "2026-11-28", "shape": (7, 384, 5, 256),
                "seconds": {872: 1.85, 3000: 2.88}}
GPU_DRAW_SECONDS = 1.60e-4
GPU_SPEEDUP = 43.3


def grams_fit(Lx: int, Ly: int, n: int, memory_gb: float | None) -> bool:
    """Both sides' Grams fit in half the pair job's working memory (reprsim.metrics.cka.grams_fit, restated here:
    importing it would make this cost model a code input of every pair job); else CKA recomputes per draw."""
    return (Lx + Ly) * n * n * W <= int((memory_gb or DEFAULT_MEMORY_GB) * 2**30) // 2


def family(spec: Mapping) -> str:
    """The route family of a configured measure (reprsim.metrics.prepared.family, by kind)."""
    name = spec.get("measure")
    if name == "cka":
        return "gram"
    if name in ("cca", "svcca", "pwcca"):
        return "basis"
    if name == "mutual_knn":
        return "neighbours"
    return "neuronsim" if name == "neuronsim" else "recompute"


def _kept(spec: Mapping, d: int) -> int:
    """Principal directions a CCA-family side keeps: pca_dims when given (SVCCA's variance cut may keep fewer;
    counted at the upper bound), else every direction."""
    return min(d, (spec.get("params") or {}).get("pca_dims") or d)


def terms_work(spec: Mapping, L: int, d: int, n: int, R: int) -> list[tuple[str, float, float]]:
    """(primitive, FLOPs, bytes) of one model's terms for one measure's family (nothing for the rest)."""
    m, kind = n // 2, family(spec)
    if kind == "gram":
        rbf = (spec.get("params") or {}).get("kernel") == "rbf"
        return [("Grams", 2 * L * n * n * d, W * L * n * n * (6 if rbf else 2)),
                ("half-sample terms", 4 * L * n * n * R, W * L * n * n * 4)]
    if kind == "basis":
        k = _kept(spec, d)
        return [("thin SVD per layer", L * (6 * n * d * d + 20 * d**3), W * L * n * d * 3),
                ("projections", L * 2 * k * n * d, W * L * n * d)]
    if kind == "neighbours":
        return [("similarities", 2 * L * n * n * d, W * L * n * n * 3),
                ("half-sample similarities", 2 * R * L * m * m * d, W * R * L * m * m * 3)]
    return []


def _gram(Lx, Ly, n, P, R) -> list[tuple[str, float, float]]:
    """Symmetric Grams: the null reads and multiplies upper triangles only (n(n+1)/2 entries)."""
    moved, fixed, half = min(Lx, Ly), max(Lx, Ly), n * (n + 1) / 2
    return [("value", 2 * Lx * Ly * n * n, W * (Lx + Ly) * n * n),
            ("null: permuted Grams", 0, P * 2 * W * moved * half),
            ("null: inner products", P * 2 * Lx * Ly * half, P * W * moved * half + W * fixed * half),
            ("interval: masked products", Lx * Ly * n * n * (1 + 2 * R), W * Lx * n * n * (2 * Ly + 1))]


def _basis(name, kx, ky, dx, dy, Lx, Ly, n, P, R) -> list[tuple[str, float, float]]:
    m, pairs = n // 2, Lx * Ly
    svd = 21 * kx**3 if name == "pwcca" else 8 / 3 * kx**3  # Golub & Van Loan: with both rotations, or values

    def evaluations(rows, count):
        work = [("products", count * 2 * rows * Lx * kx * Ly * ky, count * W * rows * (Lx * kx + Ly * ky)),
                ("k×k decompositions", count * pairs * svd, count * pairs * W * kx * ky)]
        if name == "pwcca":
            work.append(("PWCCA weights", count * pairs * 2 * kx * kx * (dx + dy), count * pairs * W * kx * (dx + dy)))
        return work

    restricted = R * (Lx + Ly) * (4 * m * kx * kx + (2 * m * kx * (dx + dy) / 2 if name == "pwcca" else 0))
    return [*(("value: " + p, f, b) for p, f, b in evaluations(n, 1)),
            *(("null: " + p, f, b) for p, f, b in evaluations(n, P)),
            ("interval: restricted bases", restricted, R * W * m * (Lx + Ly) * (kx + (dx if name == "pwcca" else 0))),
            *(("interval: " + p, f, b) for p, f, b in evaluations(m, R))]


def _neighbours(k, Lx, Ly, n, P, R) -> list[tuple[str, float, float]]:
    m = n // 2
    return [("overlaps", 0, Lx * Ly * (n * (1 + P) + m * R) * (2 * k * k + 2 * W * k)),
            ("null: permuted lists", 0, P * Ly * n * k * W * 3)]


def _recomputed(name, dx, dy, Lx, Ly, n, P, R) -> list[tuple[str, float, float]]:
    """The measures recomputed per draw (neuronsim, procrustes, mixedsim, ...): per evaluation one cross product of
    the stacks (all layer pairs); Procrustes adds each layer pair's d×d singular values, mixedsim each Y layer's
    thin SVD."""
    m, d = n // 2, min(dx, dy)
    work = []
    for part, rows, count in (("value", n, 1), ("null", n, P), ("interval", m, R)):
        work.append((f"{part}: cross products", count * 2 * rows * Lx * dx * Ly * dy,
                     count * W * (3 * rows * (Lx * dx + Ly * dy) + 3 * Lx * dx * Ly * dy)))
        if name == "procrustes":
            work.append((f"{part}: singular values", count * Lx * Ly * 8 / 3 * d**3, count * Lx * Ly * W * dx * dy))
        elif name == "mixedsim":
            work.append((f"{part}: Y's bases", count * Ly * (6 * rows * dy * dy + 20 * dy**3), count * Ly * W * rows * dy))
    return work


def pair_work(spec: Mapping, Lx: int, dx: int, Ly: int, dy: int, n: int, P: int, R: int,
              memory_gb: float | None = None) -> list[tuple[str, float, float]]:
    """(primitive, FLOPs, bytes) of one measure's value, null (P draws) and interval (R half-samples) in a pair
    job whose models' terms are given (their own work: :func:`terms_work`), within `memory_gb` of working memory."""
    kind, params = family(spec), spec.get("params") or {}
    if kind == "gram" and not grams_fit(Lx, Ly, n, memory_gb):
        return _recomputed("cka", dx, dy, Lx, Ly, n, P, R)  # the feature form, every draw
    if kind == "gram":
        rbf = params.get("kernel") == "rbf"
        rebuilt = [("Grams rebuilt (too large to store)", 2 * L * n * n * d, W * L * n * n * (6 if rbf else 2))
                   for L, d in ((Lx, dx), (Ly, dy)) if W * L * n * n > GRAM_STORE_BYTES]
        return rebuilt + _gram(Lx, Ly, n, P, R)
    if kind == "basis":
        return _basis(spec["measure"], _kept(spec, dx), _kept(spec, dy), dx, dy, Lx, Ly, n, P, R)
    if kind == "neighbours":
        return _neighbours(int(params.get("k", 10)), Lx, Ly, n, P, R)
    return _recomputed(spec.get("measure"), dx, dy, Lx, Ly, n, P, R)


def floor_seconds(work: list[tuple[str, float, float]], flops: float = CORE_FLOPS,
                  bandwidth: float = CORE_BANDWIDTH) -> float:
    """Σ over primitives of max(FLOPs / rate, bytes / bandwidth): the least time of the work on one core."""
    return sum(max(f / flops, b / bandwidth) for _, f, b in work)


# measures whose routes are counted primitive by primitive above; the others (RSM, alignment, neighbourhood and
# statistics measures of reprsim.measure_registry) are priced from their seconds measured by
# benchmarks/measure_costs.py, scaled by the registry's work model of each
COUNTED = ("cka", "cca", "svcca", "pwcca", "mutual_knn", "neuronsim", "procrustes", "mixedsim")


def measured_seconds(name: str, Lx: int, dx: int, Ly: int, dy: int, n: int, P: int, R: int) -> float | None:
    """A registry measure's pair-job seconds at these shapes and draws, from its seconds at the benchmark's shape
    (None when the benchmark has not timed it)."""
    from reprsim import measure_registry as registry  # torch-free

    costs = registry.measured_costs()
    entry = costs.get("measures", {}).get(name)
    if entry is None or name not in registry.MEASURES:
        return None
    shape, work = costs["shape"], registry.MEASURES[name].work
    scale = work(n, max(dx, dy), Lx, Ly) / work(shape["n"], shape["d"], shape["layers"], shape["layers"])
    return entry["default_seconds"] * scale * (1 + P + R) / (1 + shape["permutations"] + shape["resamples"])


def _on_gpu(seconds: float, draws: int, layer_pairs: int) -> float:
    """One measure's (or family's) seconds on a GPU from its one-core estimate `seconds` and its `draws` evaluations
    of `layer_pairs` layer pairs (GPU_DRAW_SECONDS, GPU_SPEEDUP)."""
    return GPU_DRAW_SECONDS * draws * layer_pairs + seconds / GPU_SPEEDUP


def measure_seconds(measures: Mapping[str, Mapping], Lx: int, dx: int, Ly: int, dy: int, n: int,
                    flops: float = CORE_FLOPS, bandwidth: float = CORE_BANDWIDTH, memory_gb: float | None = None,
                    gpu: bool = False) -> dict[str, float]:
    """Each measure's seconds in a pair job (each spec with its null_permutations and resamples filled in): on one
    core at floor × the measured ACHIEVED ratio of its family, or on a GPU (`gpu`: :func:`_on_gpu`); a CKA measure
    whose kernel's products an earlier one computed with as many draws costs nothing more (0)."""
    seconds, computed = {}, {}
    for label, spec in measures.items():
        kind, P, R = family(spec), int(spec.get("null_permutations") or 0), int(spec.get("resamples") or 0)
        cost = None
        if spec.get("measure") not in COUNTED:
            measured = measured_seconds(spec.get("measure"), Lx, dx, Ly, dy, n, P, R)
            if measured is not None:
                cost = measured * CORE_FLOPS / flops  # measured on a core of CORE_FLOPS
        if cost is None and kind == "gram" and not grams_fit(Lx, Ly, n, memory_gb):
            # linear CKA's feature form recomputes cross products per draw, neuronsim's primitive (and its rate)
            linear = (spec.get("params") or {}).get("kernel", "linear") == "linear"
            kind = "neuronsim" if linear else "recompute"
        elif cost is None and kind == "gram":
            kernel = (spec.get("params") or {}).get("kernel", "linear")
            if computed.get(kernel, (-1, -1)) >= (P, R):
                seconds[label] = 0.0
                continue
            computed[kernel] = (P, R)
        if cost is None:
            cost = ACHIEVED[kind] * floor_seconds(pair_work(spec, Lx, dx, Ly, dy, n, P, R, memory_gb), flops,
                                                  bandwidth)
        seconds[label] = _on_gpu(cost, 1 + P + R, Lx * Ly) if gpu else cost
    return seconds


def pair_seconds(measures: Mapping[str, Mapping], Lx: int, dx: int, Ly: int, dy: int, n: int,
                 flops: float = CORE_FLOPS, bandwidth: float = CORE_BANDWIDTH, memory_gb: float | None = None,
                 gpu: bool = False) -> float:
    """A pair job's measures (:func:`measure_seconds`), summed."""
    return sum(measure_seconds(measures, Lx, dx, Ly, dy, n, flops, bandwidth, memory_gb, gpu).values())


def draw_pairs(measures: Mapping[str, Mapping], Lx: int, Ly: int) -> int:
    """Σ (1 + P + R) × Lx × Ly over a pair job's measures, those sharing an earlier CKA's products left out: the
    count GPU_DRAW_SECONDS is per."""
    total, computed = 0, {}
    for spec in measures.values():
        P, R = int(spec.get("null_permutations") or 0), int(spec.get("resamples") or 0)
        if family(spec) == "gram":
            kernel = (spec.get("params") or {}).get("kernel", "linear")
            if computed.get(kernel, (-1, -1)) >= (P, R):
                continue
            computed[kernel] = (P, R)
        total += (1 + P + R) * Lx * Ly
    return total


def fit_gpu(points: list[tuple[int, float, float]]) -> tuple[float, float] | None:
    """GPU_DRAW_SECONDS and GPU_SPEEDUP from pair jobs measured on a GPU: each point (draw pairs (:func:`draw_pairs`),
    one-core estimate s, seconds on the GPU), least squares of seconds = a · draw pairs + s / speed-up; None where
    the points do not determine a positive pair (one shape: the draw pairs alike and the seconds not growing with
    the estimate)."""
    sxx = sum(d * d for d, _, _ in points), sum(d * c for d, c, _ in points), sum(c * c for _, c, _ in points)
    sxy = sum(d * t for d, _, t in points), sum(c * t for _, c, t in points)
    det = sxx[0] * sxx[2] - sxx[1] ** 2
    if len(points) < 2 or abs(det) <= 1e-12 * sxx[0] * sxx[2]:
        return None
    a = (sxy[0] * sxx[2] - sxy[1] * sxx[1]) / det
    b = (sxx[0] * sxy[1] - sxx[1] * sxy[0]) / det
    if a < 0 or b <= 0:
        return None
    return a, 1 / b


def terms_seconds(measures: Mapping[str, Mapping], L: int, d: int, n: int, R: int,
                  flops: float = CORE_FLOPS, bandwidth: float = CORE_BANDWIDTH, gpu: bool = False) -> float:
    """One model's terms: each family of the configured measures once, at its floor × TERMS_ACHIEVED; on a GPU
    (`gpu`) as a pair job's measure of (1 + R) draws of L layers (:func:`_on_gpu`)."""
    seen, seconds = set(), 0.0
    for spec in measures.values():
        kind, params = family(spec), spec.get("params") or {}
        key = (kind, params.get("kernel", "linear"), _kept(spec, d) if kind == "basis" else params.get("k"))
        if key not in seen and kind in TERMS_ACHIEVED:
            seen.add(key)
            ratio = TERMS_ACHIEVED["rbf" if params.get("kernel") == "rbf" else kind]
            cost = ratio * floor_seconds(terms_work(spec, L, d, n, R), flops, bandwidth)
            seconds += _on_gpu(cost, 1 + R, L) if gpu else cost
    return seconds


def _stored_family(spec: Mapping) -> tuple:
    """The terms store's family of a measure (reprsim.metrics.prepared.family, restated): SVCCA's variance cut makes
    its bases its own, RBF's bandwidth threshold its Grams'."""
    kind, params = family(spec), spec.get("params") or {}
    if kind == "gram":
        kernel = params.get("kernel", "linear")
        return kind, kernel, float(params.get("threshold", 1.0)) if kernel == "rbf" else None
    if kind == "basis":
        variance = float(params.get("threshold", 0.99)) if spec.get("measure") == "svcca" else None
        return kind, variance, params.get("pca_dims")
    return kind, int(params.get("k", 10)) if kind == "neighbours" else None


def terms_bytes(measures: Mapping[str, Mapping], L: int, d: int, n: int, R: int) -> float:
    """Bytes of one model's terms store (rule model_terms): per family of the configured measures, the centred
    Grams while they fit GRAM_STORE_BYTES, the half-sample terms, the bases and projections, the neighbour lists."""
    m, seen, total = n // 2, set(), 0.0
    for spec in measures.values():
        kind, params = family(spec), spec.get("params") or {}
        key = _stored_family(spec)
        if key in seen or kind in ("neuronsim", "recompute"):
            continue
        seen.add(key)
        if kind == "gram":
            grams = W * L * n * n
            total += (grams if grams <= GRAM_STORE_BYTES else 0) + W * (L * n + L + R * L * m + R * L)
        elif kind == "basis":
            k = _kept(spec, d)
            total += W * L * (n * k + k * d)
        else:
            k = int(params.get("k", 10))
            total += W * (L * n * k + R * L * m * k)
    return total
