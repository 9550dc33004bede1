"""Attribute domains: which attributes a table has and how many codes each one takes.

Modelled on private-pgm's ``Domain``: an immutable, ordered mapping from attribute name to
size. Every step of the engine works on integer codes ``0 .. size-1``; the sizes are public
knowledge (declared by the data owner), never read off the private table.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from math import prod

import numpy as np


@dataclass(frozen=True)
class Domain:
    """Ordered attribute names with their number of codes."""

    attributes: tuple[str, ...]
    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.attributes) != len(self.sizes):
            raise ValueError("a domain needs exactly one size per attribute")
        if len(set(self.attributes)) != len(self.attributes):
            raise ValueError("attribute names in a domain must be unique")
        for name, size in zip(self.attributes, self.sizes, strict=True):
            if int(size) < 1:
                raise ValueError(f"attribute {name!r} has size {size}; every size must be >= 1")

    @classmethod
    def from_mapping(cls, sizes: Mapping[str, int]) -> Domain:
        return cls(tuple(sizes), tuple(int(s) for s in sizes.values()))

    def __len__(self) -> int:
        return len(self.attributes)

    def __iter__(self) -> Iterator[str]:
        return iter(self.attributes)

    def __contains__(self, name: object) -> bool:
        return name in self.attributes

    def size(self, name: str) -> int:
        return self.sizes[self.index(name)]

    def index(self, name: str) -> int:
        try:
            return self.attributes.index(name)
        except ValueError:
            raise KeyError(f"no attribute {name!r} in the domain") from None

    def project(self, names: Iterable[str]) -> Domain:
        names = tuple(names)
        return Domain(names, tuple(self.size(n) for n in names))

    def cells(self, names: Iterable[str] | None = None) -> int:
        """Number of cells of the marginal on ``names`` (all attributes if None)."""
        sizes = self.sizes if names is None else [self.size(n) for n in names]
        return prod(sizes)

    def as_dict(self) -> dict[str, int]:
        return dict(zip(self.attributes, self.sizes, strict=True))


def code_dtype(largest: int) -> np.dtype:
    """The smallest unsigned type that holds codes ``0..largest-1``: the one rule for the
    table's codes, the engine's and the synthetic rows'."""
    return np.dtype(np.uint8 if largest <= 256 else np.uint16 if largest <= 65536 else np.uint32)
