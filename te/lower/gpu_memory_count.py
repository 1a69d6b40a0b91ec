"""Warp requests -> what they cost: 32-byte sectors of global memory, shared-memory wavefronts.

Takes, per access site, the byte address each thread of a block asked for and which threads
were active (gpu_memory.py's trace); gives the counts in an AccessStats
(gpu_memory_report.py), a batch of requests folded at a time with numpy. Imports numpy.
"""
from __future__ import annotations

import numpy as np

from .gpu_memory_report import AccessStats

WARP = 32
SECTOR, LINE, BANKS, BANK_BYTES = 32, 128, 32, 4
# Requests are kept per access site and folded into statistics in batches of this many
# (one numpy pass over all of them instead of one per request).
BATCH = 512


class Site:
    """Statistics of one Load or Store in the IR, and its requests not yet folded in."""

    def __init__(self, stats: AccessStats):
        self.stats = stats
        self.pending: dict = {}   # access width in bytes -> [(addresses, mask, weight)]

    def add(self, addresses, mask: np.ndarray, weight: float, width: int) -> None:
        rows = self.pending.setdefault(width, [])
        rows.append((addresses, mask, weight))
        if len(rows) >= BATCH:
            self.fold(width)

    def fold(self, width: int) -> None:
        rows = self.pending.pop(width, [])
        if not rows:
            return
        threads = rows[0][1].size
        padded = -threads % WARP
        addresses = np.empty((len(rows), threads), dtype=np.int64)
        masks = np.empty((len(rows), threads), dtype=bool)
        for k, (address, mask, _) in enumerate(rows):
            addresses[k] = address   # broadcasts one address for all threads
            masks[k] = mask
        weights = np.repeat([r[2] for r in rows], (threads + padded) // WARP)
        if padded:
            addresses = np.pad(addresses, ((0, 0), (0, padded)))
            masks = np.pad(masks, ((0, 0), (0, padded)))
        addresses = addresses.reshape(-1, WARP)
        masks = masks.reshape(-1, WARP)
        live = masks.any(axis=1)
        addresses, masks, weights = addresses[live], masks[live], weights[live]
        (_global_requests if self.stats.scope == "global" else _shared_requests)(
            self.stats, addresses, masks, weights, width)

    def finish(self) -> AccessStats:
        for width in list(self.pending):
            self.fold(width)
        return self.stats


def _distinct(keys: np.ndarray, mask: np.ndarray) -> tuple:
    """Per row: the number of distinct keys among the masked-in entries (keys >= 0), and
    a flag per entry (in sorted order) marking the first of each distinct key."""
    k = np.where(mask, keys, -1)
    k.sort(axis=1)
    first = k >= 0
    first[:, 1:] &= k[:, 1:] != k[:, :-1]
    return first.sum(axis=1), k, first


def _global_requests(stats: AccessStats, addresses, masks, weights, width: int) -> None:
    # a lane reads bytes [a, a + width): its first and last sector (the same when aligned)
    ends = addresses + (width - 1)
    both = np.concatenate([addresses, ends], axis=1)
    both_mask = np.concatenate([masks, masks], axis=1)
    sectors, _, _ = _distinct(both // SECTOR, both_mask)
    lines, _, _ = _distinct(both // LINE, both_mask)
    distinct, _, _ = _distinct(addresses, masks)
    nbytes = distinct * width
    stats.requests += float(weights.sum())
    stats.lanes += float((masks.sum(axis=1) * weights).sum())
    stats.sectors += float((sectors * weights).sum())
    stats.ideal_sectors += float((-(-nbytes // SECTOR) * weights).sum())
    stats.lines += float((lines * weights).sum())
    stats.ideal_lines += float((-(-nbytes // LINE) * weights).sum())


def _shared_requests(stats: AccessStats, addresses, masks, weights, width: int) -> None:
    words_per_lane = max(1, width // BANK_BYTES)
    words = np.concatenate([addresses // BANK_BYTES + j for j in range(words_per_lane)],
                           axis=1)
    word_mask = np.concatenate([masks] * words_per_lane, axis=1)
    distinct, sorted_words, first = _distinct(words, word_mask)
    rows = np.broadcast_to(np.arange(len(words))[:, None], words.shape)
    per_bank = np.bincount((rows * BANKS + sorted_words % BANKS)[first],
                           minlength=len(words) * BANKS).reshape(-1, BANKS)
    wavefronts = per_bank.max(axis=1)
    ideal = -(-distinct // BANKS)
    stats.requests += float(weights.sum())
    stats.lanes += float((masks.sum(axis=1) * weights).sum())
    stats.wavefronts += float((wavefronts * weights).sum())
    stats.ideal_wavefronts += float((ideal * weights).sum())
    if len(wavefronts):
        stats.max_ways = max(stats.max_ways, float((wavefronts / ideal).max()))


def warps(mask: np.ndarray) -> int:
    padded = np.pad(mask, (0, -mask.size % WARP)).reshape(-1, WARP)
    return int(padded.any(axis=1).sum())
