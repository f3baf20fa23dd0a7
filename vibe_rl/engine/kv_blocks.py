"""Paged KV-cache bookkeeping: fixed-size blocks, reference counts and a prefix cache.

Pure Python (no torch): the paged generator asks it which cache rows a sequence
may use; the tensors themselves live in `vibe_rl.engine.paged_model`.

The rules
---------
* A sequence's KV cache is its block table: token i lives in block `table[i // B]`
  at offset `i % B` (B = block_size). Joining or leaving a batch never copies
  another sequence's cache: only block ids move.
* Prefix reuse. A block full of computed tokens is registered under the key
  (parent node, its B token ids), where the parent node names the block before
  it; equal keys therefore mean equal token prefixes, compared exactly (no hash
  collisions). A new request walks its prompt's full blocks and shares every
  block already registered (refcount + 1) until the first miss; only the rest is
  prefilled. At least one prompt token is always recomputed, because sampling
  needs the logits of the last prompt token.
* A block whose refcount drops to 0 keeps its key and stays cached (least
  recently used first out) until its space is needed: a new block takes a plain
  free block first, then evicts the oldest cached one.
* `invalidate()` forgets every key: after a weight update the cached KV was
  computed by old weights and must not be reused.
* Block 0 is reserved scratch space (padding rows of a CUDA-graph batch write there).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field

Key = tuple[int, tuple[int, ...]]


@dataclass
class Match:
    """The cached prefix of a prompt: shared blocks, their prefix-tree nodes, and the tokens they hold."""

    blocks: list[int] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)

    def tokens(self, block_size: int) -> int:
        return len(self.blocks) * block_size


class BlockManager:
    """Allocates KV blocks, shares registered prefix blocks, evicts cached ones LRU."""

    def __init__(self, num_blocks: int, block_size: int):
        if num_blocks < 2:
            raise ValueError(f"the KV cache needs at least 2 blocks (one is scratch), got {num_blocks}")
        self.num_blocks, self.block_size = num_blocks, block_size
        self.refcount = [0] * num_blocks
        self._free: deque[int] = deque(range(1, num_blocks))  # free, no key
        self._cached: OrderedDict[int, None] = OrderedDict()  # free, keyed; oldest first
        self._key_of: dict[int, Key] = {}  # block -> key
        self._node_of: dict[int, int] = {}  # block -> prefix-tree node id
        self._by_key: dict[Key, tuple[int, int]] = {}  # key -> (block, node id)
        self._next_node = 1  # node 0 is the root (the empty prefix)
        self.evictions = 0

    # ---- queries --------------------------------------------------------------------------

    @property
    def available(self) -> int:
        """Blocks a new allocation could take (plain free plus evictable cached)."""
        return len(self._free) + len(self._cached)

    @property
    def cached_blocks(self) -> int:
        return len(self._by_key)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    # ---- prefix sharing -------------------------------------------------------------------

    def match(self, prompt: list[int]) -> Match:
        """Share the longest registered prefix of `prompt` (whole blocks, leaving >= 1 token to compute)."""
        bs = self.block_size
        usable = (len(prompt) - 1) // bs  # full blocks that still leave one prompt token to compute
        found = Match()
        parent = 0
        for k in range(usable):
            hit = self._by_key.get((parent, tuple(prompt[k * bs:(k + 1) * bs])))
            if hit is None:
                break
            block, parent = hit
            self._take(block)
            found.blocks.append(block)
            found.nodes.append(parent)
        return found

    def register(self, block: int, parent_node: int, tokens: list[int]) -> int:
        """Record that `block` holds `tokens` after the prefix `parent_node`; returns this prefix's node id.

        When another block already holds the same prefix, that one's node is returned and
        `block` stays unregistered (it is freed plainly later).
        """
        key = (parent_node, tuple(tokens))
        existing = self._by_key.get(key)
        if existing is not None:
            return existing[1]
        if block in self._key_of:  # already registered under another prefix: keep the first
            return self._node_of[block]
        node = self._next_node
        self._next_node += 1
        self._by_key[key] = (block, node)
        self._key_of[block] = key
        self._node_of[block] = node
        return node

    def invalidate(self) -> None:
        """Forget every prefix (the weights changed); cached free blocks become plain free blocks."""
        self._by_key.clear()
        self._key_of.clear()
        self._node_of.clear()
        self._free.extend(self._cached)
        self._cached.clear()

    # ---- allocation -----------------------------------------------------------------------

    def allocate(self, n: int) -> list[int] | None:
        """n private blocks (refcount 1), or None when not even eviction frees enough."""
        if n > self.available:
            return None
        out = []
        for _ in range(n):
            if self._free:
                block = self._free.popleft()
            else:
                block, _ = self._cached.popitem(last=False)  # least recently used
                self._forget(block)
                self.evictions += 1
            self.refcount[block] = 1
            out.append(block)
        return out

    def release(self, blocks: list[int]) -> None:
        """Drop one reference to each block; unreferenced keyed blocks stay cached, others become free."""
        for block in blocks:
            self.refcount[block] -= 1
            if self.refcount[block] == 0:
                if block in self._key_of:
                    self._cached[block] = None  # most recently used end
                else:
                    self._free.append(block)

    def _take(self, block: int) -> None:
        if self.refcount[block] == 0:
            self._cached.pop(block, None)
        self.refcount[block] += 1

    def _forget(self, block: int) -> None:
        key = self._key_of.pop(block, None)
        self._node_of.pop(block, None)
        if key is not None:
            self._by_key.pop(key, None)
