"""An assistant's session with `vramscope mcp`, through the Python MCP SDK
(pinned in requirements-test.txt): it asks "why did this snapshot run out of
memory" the way a coding assistant does -- list the tools, pick the one that
analyses a snapshot, read its summary -- on the repository's real
out-of-memory recordings, and checks that the answer names the cause the
recording is labelled with (examples/snapshots/expected_findings.json) and
the top line the engine finds (`vramscope analyze --json`)."""
import asyncio
import json
import os
import subprocess

import pytest
from conftest import ROOT, missing, require_module

BIN = os.path.join(ROOT, "bin", "vramscope")
LABELS = os.path.join(ROOT, "examples", "snapshots", "expected_findings.json")

mcp = require_module("mcp", "the Python MCP SDK (mcp) is not installed: make setup")
if not os.access(BIN, os.X_OK):
    missing("bin/vramscope is not built (make build)")


def _recording(name):
    with open(LABELS) as f:
        return next(r for r in json.load(f)["recordings"] if r["name"] == name)


async def _ask_why(path, socket):
    """The assistant's turn: which tools are there, then the analysis."""
    params = mcp.StdioServerParameters(command=BIN, args=["mcp", "--socket", socket])
    async with mcp.Client(params) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        tool = next(name for name, t in tools.items() if "ran out of memory" in t.description)
        result = await client.call_tool(tool, {"snapshot": path})
        assert not result.is_error, result
        return tool, "".join(c.text for c in result.content if c.type == "text")


@pytest.mark.parametrize("name", ["agent_oom", "frag_oom", "activation_oom"])
def test_why_did_it_run_out_of_memory(name, tmp):
    rec = _recording(name)
    path = os.path.join(ROOT, rec["file"])
    engine = json.loads(subprocess.run([BIN, "analyze", "--json", path], check=True, capture_output=True, text=True).stdout)
    tool, answer = asyncio.run(_ask_why(path, os.path.join(tmp, "none.sock")))
    assert tool == "analyze_snapshot"
    assert "Out of memory on device" in answer, answer
    oom = next(f for f in engine["findings"] if f["kind"] == "oom")
    assert "cause: %s" % oom["cause"] in answer, answer
    assert oom["cause"] in rec["kinds"], (oom["cause"], rec["kinds"])  # the engine agrees with the label
    top = engine["sites"][0]
    assert "%s:%d" % (os.path.basename(top["file"]), top["line"]) in answer, answer
    assert len(answer) < 6000, len(answer)


def test_without_a_daemon_it_says_so(tmp):
    async def ask():
        params = mcp.StdioServerParameters(command=BIN, args=["mcp", "--socket", os.path.join(tmp, "none.sock")])
        async with mcp.Client(params) as client:
            return await client.call_tool("list_snapshots", {})

    result = asyncio.run(ask())
    assert result.is_error
    assert "no vramscope daemon runs" in result.content[0].text and "vramscope serve" in result.content[0].text
