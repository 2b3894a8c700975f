"""Synthetic data sets shaped like the papers' (fixed seed, progress bars).

ImageNet-like: JPEGs (Pillow) in class folders whose sizes follow ImageNet's
(log-normal, median about 88 KB). Malware-like: byte files with the size
distribution of the Kaggle Microsoft Malware 2015 set (median about 4 MB, a
heavy tail, and about 40 % of files under 2 MB holding under a tenth of the
bytes), in nine class folders."""
from __future__ import annotations

import io
import os
import pathlib
from typing import List

import numpy as np
from tqdm.auto import tqdm

IMAGENET_MEDIAN = 88_000
MALWARE_CLASSES = 9


def imagenet_sizes(n: int, rng, scale: float = 1.0) -> np.ndarray:
    return np.clip(rng.lognormal(np.log(IMAGENET_MEDIAN * scale), 0.55, n), 4_000 * scale, 2_000_000 * scale)


def malware_sizes(n: int, rng, scale: float = 1.0) -> np.ndarray:
    # two populations: 40 % small samples under 2 MB, the rest log-normal around 7.5 MB
    small = rng.random(n) < 0.4
    sizes = np.where(small, np.clip(rng.lognormal(np.log(1_300_000), 0.45, n), 20_000, 1_990_000),
                     np.clip(rng.lognormal(np.log(7_500_000), 0.75, n), 2_000_000, 120_000_000))
    return (sizes * scale).astype(np.int64)


def _jpeg(rng, target: int, quality: int = 90) -> bytes:
    """A noisy picture whose JPEG encoding is close to `target` bytes."""
    from PIL import Image
    side = max(32, int((target / 0.9) ** 0.5))        # noisy JPEGs take about 0.9 bytes a pixel
    base = rng.integers(0, 255, (side // 8 + 1, side // 8 + 1, 3), dtype=np.uint8)
    img = np.kron(base, np.ones((8, 8, 1), dtype=np.uint8))[:side, :side]
    img = np.clip(img.astype(np.int16) + rng.integers(-40, 40, img.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def make_imagenet(root: pathlib.Path, n: int, classes: int = 10, seed: int = 0, scale: float = 1.0) -> List[str]:
    rng = np.random.default_rng(seed)
    sizes = imagenet_sizes(n, rng, scale)
    paths = []
    for i, target in enumerate(tqdm(sizes, desc="ImageNet-like JPEGs", unit="file", leave=False)):
        p = root / f"n{i % classes:08d}" / f"img_{i:06d}.JPEG"
        paths.append(str(p))
        if p.exists():
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(_jpeg(rng, int(target)))
    return paths


def make_malware(root: pathlib.Path, n: int, seed: int = 0, scale: float = 1.0) -> List[str]:
    rng = np.random.default_rng(seed)
    sizes = malware_sizes(n, rng, scale)
    block = rng.bytes(1 << 20)
    paths = []
    for i, size in enumerate(tqdm(sizes, desc="malware-like byte files", unit="file", leave=False)):
        p = root / f"class_{i % MALWARE_CLASSES + 1}" / f"sample_{i:05d}.bytes"
        paths.append(str(p))
        if p.exists() and p.stat().st_size == size:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "wb") as f:
            left = int(size)
            head = rng.bytes(min(left, 4096))            # each file starts differently
            f.write(head)
            left -= len(head)
            while left > 0:
                f.write(block[: min(left, len(block))])
                left -= min(left, len(block))
    return paths
