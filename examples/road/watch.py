"""The daemon's side of examples/road/agent_all.sh (docs/oom-warning.md).

    python3 watch.py SOCKET events FILE    every event.* notification, one JSON line each
                                           prefixed by the unix time it came, until killed
    python3 watch.py SOCKET ps FILE        process.list once a second (the ps column's
                                           forecast), a JSON line each, until killed
    python3 watch.py SOCKET findings FILE  every stored snapshot's reason, source, pid and
                                           findings (analysis.report), one JSON document
"""
import json
import sys
import time

import gpu_e2e


def events(sock, path):
    c = gpu_e2e.Client(sock)
    c.call("events.subscribe", {"topics": []})
    with open(path, "a") as out:
        for line in c.f:
            out.write(f"{time.time():.3f} {line.decode().strip()}\n")
            out.flush()


def ps(sock, path):
    c = gpu_e2e.Client(sock)
    with open(path, "a") as out:
        while True:
            out.write(json.dumps({"t": round(time.time(), 3), "processes": c.call("process.list")}) + "\n")
            out.flush()
            time.sleep(1)


def findings(sock, path):
    c = gpu_e2e.Client(sock)
    doc = []
    for s in c.call("snapshot.list", {}).get("snapshots") or []:
        rep = c.call("analysis.report", {"id": s["id"]})
        doc.append({"id": s["id"], "reason": s.get("reason"), "source": s.get("source"), "pid": s.get("pid"),
                    "findings": [{k: f.get(k) for k in ("kind", "severity", "file", "line", "title")}
                                 for f in rep.get("findings", [])]})
    with open(path, "w") as out:
        json.dump(doc, out, indent=1)


if __name__ == "__main__":
    {"events": events, "ps": ps, "findings": findings}[sys.argv[2]](sys.argv[1], sys.argv[3])
