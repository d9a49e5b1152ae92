"""vramscope/_api.py mirrors daemon/api/api.go's method names."""
import os
import re

from conftest import PKG_PARENT, ROOT

API_PY = os.path.join(PKG_PARENT, "vramscope", "_api.py")
API_GO = os.path.join(ROOT, "daemon", "api", "api.go")
LINE = re.compile(r'^([A-Z][A-Z0-9_]*) = "([^"]*)"$')


def python_names():
    names = []
    for line in open(API_PY):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, "not a plain NAME = \"value\" line: %r" % line
        names.append((m.group(1), m.group(2)))
    return names


def test_names_are_plain_and_unique():
    names = python_names()
    keys = [k for k, _ in names]
    values = [v for _, v in names]
    assert len(keys) == len(set(keys)), "duplicate constant"
    assert len(values) == len(set(values)), "duplicate method name"
    d = dict(names)
    assert d["API_VERSION"] == "1.0"
    for k in ("HELLO", "AGENT_REGISTER", "AGENT_DUMP", "AGENT_CAPTURED", "AGENT_TORCH"):
        assert k in d


def go_methods():
    src = open(API_GO).read()
    block = re.search(r"// Method names, as the wire spells them\.\nconst \((.*?)\n\)", src, re.S).group(1)
    consts = dict(re.findall(r'^\s*(\w+)\s*=\s*"([^"]+)"', block, re.M))
    table = re.search(r"var Methods = \[\]Method\{(.*?)\n\}", src, re.S).group(1)
    used = re.findall(r"^\s*\{(\w+),", table, re.M)
    version = re.search(r'const Version = "([^"]+)"', src).group(1)
    return {n: consts[n] for n in used}, version


def snake(name):
    """AgentRegister -> AGENT_REGISTER, EventOOMCaptured -> EVENT_OOM_CAPTURED."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).upper()


def test_names_match_go_table():
    if not os.path.exists(API_GO):
        import pytest

        pytest.skip("daemon/api/api.go not present")
    methods, version = go_methods()
    py = dict(python_names())
    assert py.pop("API_VERSION") == version
    assert py == {snake(k): v for k, v in methods.items()}
