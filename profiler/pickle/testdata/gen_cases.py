#!/usr/bin/env python3
"""Writes the pickles that opcodes_test.go and refuse_test.go decode.

Every file is produced by CPython's own pickle module (the pickler a snapshot
comes from), for protocols 2 to 5, so the tests check the decoder against the
opcode sequences real picklers emit rather than against hand-written guesses.
The expected Go values live in the tests, not here.

Run from anywhere:  python3 profiler/pickle/testdata/gen_cases.py
Output is deterministic (PYTHONHASHSEED does not matter: sets hold ints only).
"""

import collections
import datetime
import os
import pickle
import pickletools

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "cases")
REFUSED = os.path.join(HERE, "refused")


def ints():
    return [0, 1, 255, 256, 65535, 65536, -1, -256, 2**31 - 1, -2**31, 2**31, -2**31 - 1,
            2**63 - 1, -2**63, 2**63, 2**64 - 1, -2**63 - 1, 2**100, -2**100,
            2**4000, -(2**4000)]  # the last two need LONG4 (more than 255 bytes)


def floats():
    return [0.0, -0.0, 1.5, -2.25, 1e308, 5e-324, float("inf"), float("-inf"), float("nan")]


def strings():
    return ["", "a", "ascii", "h\u00e9llo w\u00f6rld", "\u65e5\u672c\u8a9e\u30c6\u30ad\u30b9\u30c8",
            "\U0001f680 emoji", "x" * 255, "y" * 256, "\u00fc" * 200, "\x00nul\x00", "tab\tnew\nline"]


def tuples():
    return [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), ((), ((),)), tuple(range(10))]


def nested():
    return {"a": [1, {"b": (2, [3])}], "c": {"d": {}}, "e": [], "f": (None, True, False)}


def memo_many():
    # 300 distinct lists, then the same lists again in reverse: the second half is
    # all memo reads, and slots past 255 need LONG_BINPUT (protocols 2, 3) and
    # LONG_BINGET.
    objs = [[i] for i in range(300)]
    return [objs, list(reversed(objs))]


def shared():
    a = [1, 2]
    s = "a shared string"
    return [a, a, {"x": a, "s": s}, s]


def self_list():
    l = []
    l.append(l)
    return l


def self_dict():
    d = {}
    d["self"] = d
    return d


def recursive_tuple1():
    # The pickler finds the tuple memoised while saving its own items and emits
    # POP + BINGET (at most 3 items).
    l = []
    t = (l,)
    l.append(t)
    return t


def recursive_tuple4():
    # The same with 4 items: POP_MARK + BINGET.
    l = []
    t = (l, 1, 2, 3)
    l.append(t)
    return t


CASES = {
    # name: (object factory, protocols)
    "none_bool": (lambda: [None, True, False], (2, 3, 4, 5)),
    "ints": (ints, (2, 3, 4, 5)),
    "floats": (floats, (2, 3, 4, 5)),
    "strings": (strings, (2, 3, 4, 5)),
    "bytes": (lambda: [b"", b"\x00\xff", b"a" * 300], (2, 3, 4, 5)),
    "bytearray": (lambda: [bytearray(b"abc"), bytearray(b"\x00" * 10)], (2, 3, 4, 5)),
    "tuples": (tuples, (2, 3, 4, 5)),
    "nested": (nested, (2, 3, 4, 5)),
    "dict_keys": (lambda: {1: "one", (1, 2): "tuple", None: "none", 2.5: "float", "s": "str"}, (2, 3, 4, 5)),
    "sets": (lambda: [{1, 2, 3}, frozenset({4}), set(), frozenset()], (2, 3, 4, 5)),
    "frozenset_key": (lambda: {frozenset({1, 2}): "fs"}, (4, 5)),
    "single": (lambda: [[7], {"k": 1}], (2, 3, 4, 5)),
    "big_list": (lambda: list(range(2001)), (2, 3, 4, 5)),
    "big_dict": (lambda: {str(i): i for i in range(1001)}, (2, 3, 4, 5)),
    "big_set": (lambda: set(range(1001)), (4, 5)),
    "memo_many": (memo_many, (2, 3, 4, 5)),
    "shared": (shared, (2, 3, 4, 5)),
    "self_list": (self_list, (2, 3, 4, 5)),
    "self_dict": (self_dict, (2, 3, 4, 5)),
    "recursive_tuple1": (recursive_tuple1, (2, 3, 4, 5)),
    "recursive_tuple4": (recursive_tuple4, (2, 3, 4, 5)),
    # More than one 64 KiB frame (protocols 4 and 5 frame alike).
    "frames": (lambda: list(range(256, 256 + 23000)), (4,)),
}


class Plain:
    """A class instance: GLOBAL/STACK_GLOBAL + NEWOBJ + BUILD."""

    def __init__(self):
        self.x = 1


class WithNewArgsEx:
    """Protocol 4+ pickles this with NEWOBJ_EX."""

    def __new__(cls, *args, **kw):
        return super().__new__(cls)

    def __getnewargs_ex__(self):
        return ((1,), {"k": 2})


class Evil:
    """What an attacker would ship: unpickling calls os.system. The file it would
    create is checked for by the test after decoding."""

    def __reduce__(self):
        return (os.system, ("touch vramscope_pwned",))


REFUSED_CASES = {
    # name: (object factory, protocols); the test knows which opcode comes first.
    "instance": (Plain, (2, 3, 4, 5)),
    "ordereddict": (lambda: collections.OrderedDict(a=1), (2, 3, 4, 5)),
    "datetime": (lambda: datetime.datetime(2020, 1, 2, 3, 4, 5), (2, 3, 4, 5)),
    "newobj_ex": (WithNewArgsEx, (4, 5)),
    "os_system": (Evil, (2, 4)),
    "tensor_like": (lambda: {"segments": [], "weights": collections.OrderedDict()}, (2, 4)),
}


def first_refused(b):
    bad = {"GLOBAL", "STACK_GLOBAL", "REDUCE", "BUILD", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX",
           "EXT1", "EXT2", "EXT4", "PERSID", "BINPERSID", "NEXT_BUFFER", "READONLY_BUFFER"}
    for op, _, pos in pickletools.genops(b):
        if op.name in bad:
            return op.name, pos
    return None, None


# Opcodes each file must contain, so that the tests keep covering them if
# CPython's pickler ever changes how it writes these objects.
MUST_HOLD = {
    "cases/memo_many_p2": {"BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET"},
    "cases/memo_many_p4": {"MEMOIZE", "BINGET", "LONG_BINGET"},
    "cases/ints_p2": {"BININT1", "BININT2", "BININT", "LONG1", "LONG4"},
    "cases/strings_p2": {"BINUNICODE"},
    "cases/strings_p4": {"SHORT_BINUNICODE", "BINUNICODE"},
    "cases/bytes_p3": {"SHORT_BINBYTES", "BINBYTES"},
    "cases/bytearray_p5": {"BYTEARRAY8"},
    "cases/sets_p4": {"EMPTY_SET", "ADDITEMS", "FROZENSET"},
    "cases/tuples_p2": {"EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3", "TUPLE", "MARK"},
    "cases/single_p2": {"APPEND", "SETITEM"},
    "cases/big_list_p2": {"APPENDS"},
    "cases/big_dict_p2": {"SETITEMS"},
    "cases/none_bool_p2": {"NONE", "NEWTRUE", "NEWFALSE"},
    "cases/floats_p2": {"BINFLOAT"},
    "cases/recursive_tuple1_p2": {"POP", "BINGET"},
    "cases/recursive_tuple4_p4": {"POP_MARK"},
    "refused/newobj_ex_p4": {"NEWOBJ_EX"},
    "refused/instance_p2": {"NEWOBJ", "BUILD"},
}


def check_coverage():
    for name, want in MUST_HOLD.items():
        with open(os.path.join(HERE, name + ".pickle"), "rb") as f:
            have = {op.name for op, _, _ in pickletools.genops(f.read())}
        assert want <= have, (name, want - have)
    with open(os.path.join(OUT, "frames_p4.pickle"), "rb") as f:
        frames = [op for op, _, _ in pickletools.genops(f.read()) if op.name == "FRAME"]
    assert len(frames) >= 2, "frames_p4 should span several frames"


def main():
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(REFUSED, exist_ok=True)
    for d in (OUT, REFUSED):
        for f in os.listdir(d):
            if f.endswith(".pickle"):
                os.remove(os.path.join(d, f))
    for name, (make, protos) in CASES.items():
        for proto in protos:
            b = pickle.dumps(make(), protocol=proto)
            with open(os.path.join(OUT, f"{name}_p{proto}.pickle"), "wb") as f:
                f.write(b)
    manifest = []
    for name, (make, protos) in REFUSED_CASES.items():
        for proto in protos:
            b = pickle.dumps(make(), protocol=proto)
            op, pos = first_refused(b)
            assert op is not None, (name, proto)
            with open(os.path.join(REFUSED, f"{name}_p{proto}.pickle"), "wb") as f:
                f.write(b)
            manifest.append(f"{name}_p{proto}.pickle\t{op}\t{pos}\n")
    # The first refused opcode of each file and its offset, as pickletools sees it.
    with open(os.path.join(REFUSED, "first_refused.tsv"), "w") as f:
        f.writelines(manifest)
    check_coverage()


if __name__ == "__main__":
    main()
