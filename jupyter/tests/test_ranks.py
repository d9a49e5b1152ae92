"""The ranks of one job in the notebook (%vramscope ranks, %vramscope snap
PID --job), in a real kernel with the real engine; for snap --job, a real
daemon (bin/vramscope serve) and two real agents in child processes, one
launch's ranks 0 and 1.

The three whatif recordings (GPT-2 at batch 2, 4 and 8 on the H200,
examples/record/record_whatif.py) stand in for ranks 0, 1 and 2 of a job
whose batch is split unevenly; they are not one launch."""
import json
import os
import subprocess
import sys
import time

import pytest

from conftest import PKG_PARENT, ROOT
from test_notebook import engine, execute, kernel_env, outputs, report, stderr  # noqa: F401 (engine: a fixture)

WHATIF = [os.path.join(ROOT, "examples", "snapshots", "whatif", "whatif_bs%d.pickle" % b) for b in (2, 4, 8)]


def rank_files(d):
    out = []
    for rank, src in enumerate(WHATIF):
        dst = os.path.join(d, "snapshot_%d.pickle" % rank)
        os.symlink(src, dst)
        out.append(dst)
    return out


def html_of(cell):
    """The rank table: the HTML output before the report's two."""
    for o in outputs(cell, "display_data"):
        h = o.data.get("text/html", "")
        if "<table>" in h and "median rank" in h:
            return h
    raise AssertionError(cell.outputs)


def row(table, rank):
    for tr in table.split("<tr>")[1:]:
        if tr.startswith('<td style="text-align:right;padding:0 8px">%d</td>' % rank):
            return tr
    raise AssertionError("no row for rank %d in %s" % (rank, table))


def engine_ranks(engine, files):
    return json.loads(subprocess.run([engine, "ranks", "--json"] + files, capture_output=True, check=True).stdout)


@pytest.fixture(scope="module")
def job(engine, tmp_path_factory):
    """A daemon and two agents of one launch (ranks 0 and 1: batch 4 and 8)."""
    d = str(tmp_path_factory.mktemp("ranks"))
    sock = os.path.join("/tmp", "vsr-%d.sock" % os.getpid())  # short: Unix socket paths are limited
    serve = subprocess.Popen([engine, "serve", "--socket", sock, "--data-dir", os.path.join(d, "data"), "--spool", "-"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    agents = []
    try:
        for rank, src in enumerate(WHATIF[1:]):
            env = dict(os.environ, PYTHONPATH=PKG_PARENT, VRAMSCOPE_SOCKET=sock, VRAMSCOPE_TEST_SNAPSHOT=src,
                       TORCHELASTIC_RUN_ID="nbjob", RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2")
            agents.append(subprocess.Popen([sys.executable, "-c", "import time, vramscope\nvramscope.attach()\n"
                                            "time.sleep(300)"], env=env))
        pids = {a.pid for a in agents}
        end = time.time() + 30
        while time.time() < end:
            p = subprocess.run([engine, "ps", "--json", "--socket", sock], capture_output=True, text=True)
            seen = {x["pid"] for x in json.loads(p.stdout or "{}").get("processes") or [] if x.get("job") == "run:nbjob"}
            if p.returncode == 0 and pids <= seen:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the agents did not register")
        yield sock, agents
    finally:
        for p in agents + [serve]:
            p.kill()
            p.wait()


@pytest.fixture(scope="module")
def nb(engine, job, tmp_path_factory):
    files = rank_files(str(tmp_path_factory.mktemp("files")))
    sock, agents = job
    cells = ["%load_ext vramscope",
             "%vramscope ranks " + " ".join(files),
             "%vramscope ranks " + " ".join(files) + " --rank 0",
             "%vramscope ranks " + " ".join(files) + " --rank 7",
             "%%vramscope snap %d --job --socket %s" % (agents[1].pid, sock),
             "%vramscope snap 1"]
    cells[4] = cells[4][1:]  # a line magic
    return execute(cells, kernel_env(engine, VRAMSCOPE_SOCKET=sock)), files


def test_rank_table_from_files(nb, engine):
    book, files = nb
    rv = engine_ranks(engine, files)
    table = html_of(book.cells[1])
    assert "3 ranks" in table and "imbalance %.2f" % rv["imbalance"] in table
    assert "outlier" in row(table, 2) and "\u25c0 shown" in row(table, 2)  # the heaviest is shown first
    assert "outlier" not in row(table, 1) and "shown" not in row(table, 1)
    assert "rank 2 against the median rank 1" in table and "record_whatif.py:31" in table
    rep = report(book.cells[1])
    assert "rank 2" in rep["text/html"] and "snapshot_2.pickle" in rep["text/html"]


def test_rank_chosen(nb):
    book, _ = nb
    assert "\u25c0 shown" in row(html_of(book.cells[2]), 0)
    assert "rank 0" in report(book.cells[2])["text/html"]
    bad = book.cells[3]
    assert "no rank 7 here (ranks 0, 1, 2)" in json.dumps([o.get("evalue", "") + o.get("text", "") for o in bad.outputs])


def test_snap_job_through_the_daemon(nb):
    book, _ = nb
    cell = book.cells[4]
    assert "(run:nbjob): 2 ranks, skew" in stderr(cell)
    table = html_of(cell)
    assert "2 ranks" in table and "\u25c0 shown" in row(table, 1) and "outlier" in row(table, 1)
    assert "--job" in json.dumps([o.get("evalue", "") + o.get("text", "") for o in book.cells[5].outputs])
