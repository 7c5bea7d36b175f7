"""memd.record: frozen value records that stand in for frozen dataclasses on the hook path."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
from typing import ClassVar

import pytest

from memd.record import Record, astuple, field, fields, replace


class Point(Record):
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)
    unit: ClassVar[str] = "px"  # not a field

    @property
    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)


class Point3(Point):
    z: int = 0


class Pair(Record):
    a: int
    b: str


def test_construction_positional_keyword_and_defaults() -> None:
    assert Point(1, 2) == Point(x=1, y=2) == Point(1, y=2)
    p = Point(3)
    assert (p.x, p.y, p.tags, p.norm1) == (3, 0, [], 3)
    assert Point(1).tags is not Point(1).tags  # a factory default is made per instance
    assert Point.y == 0 and not hasattr(Point, "tags")  # as dataclasses leave them
    assert Point.unit == "px" and [f.name for f in fields(Point)] == ["x", "y", "tags"]
    with pytest.raises(TypeError, match="missing required argument 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword argument 'w'"):
        Point(1, w=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="multiple values"):
        Point(1, x=2)  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        Point(1, 2, [], 4)  # type: ignore[call-arg]


def test_value_semantics_and_repr() -> None:
    assert Point(1, 2) != Point(1, 3)
    assert Point(1, 2) != Point3(1, 2)  # another class is never equal, as with dataclasses
    assert Point(1, 2) != (1, 2, [])
    a, b = Point3(1, 2, ["t"], 3), Point3(1, 2, ["t"], 3)
    assert a == b and astuple(a) == (1, 2, ["t"], 3)
    assert repr(a) == "Point3(x=1, y=2, tags=['t'], z=3)"
    assert len({Pair(1, "a"), Pair(1, "a"), Pair(2, "a")}) == 2  # hashed by value
    with pytest.raises(TypeError):
        hash(a)  # a list field makes it unhashable, as a frozen dataclass would be


def test_frozen() -> None:
    p = Point(1)
    with pytest.raises(AttributeError, match="frozen"):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError, match="frozen"):
        p.other = 2  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="frozen"):
        del p.x
    assert p.x == 1


def test_replace_copy_pickle() -> None:
    p = Point(1, 2, ["a"])
    q = replace(p, y=5)
    assert (q.x, q.y, q.tags) == (1, 5, ["a"]) and p.y == 2
    with pytest.raises(TypeError, match="no field 'w'"):
        replace(p, w=1)
    assert copy.deepcopy(p) == p and copy.copy(p) == p
    assert pickle.loads(pickle.dumps(p)) == p


def test_field_order_rule() -> None:
    with pytest.raises(TypeError, match="non-default field 'b' follows a default field"):
        class Bad(Record):
            a: int = 1
            b: int  # type: ignore[misc]


def test_importing_records_costs_no_dataclasses_or_typing() -> None:
    code = ("import sys, memd.record, memd.config, memd.layout, memd.core.index, memd.core.secrets; "
            "memd.config.load(); print(sorted({'dataclasses', 'typing', 'inspect', 'tomllib'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent", "PATH": "/usr/bin"})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
