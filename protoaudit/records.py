"""How protoaudit's many small records are declared: a dataclass with __slots__ (Python 3.10 on).

A 10,000-layer net makes some 100,000 Buffers and Touches. A slotted dataclass that is not frozen
is built by a plain __init__ (a frozen one sets each field through object.__setattr__, several
times slower) and holds its fields without a per-object dict; records are made once and only read
afterwards. bench/README.md has the figures.

Every dataclass also costs every start its generated methods, compiled from source (about 2-4M
instructions a class, a frozen one the most), so a record made a few times and never changed is a
typing.NamedTuple instead (Schema, Source, Found, Geometry...: a fifth to a third of that).
"""
import sys

RECORD = {"slots": True} if sys.version_info >= (3, 10) else {}
