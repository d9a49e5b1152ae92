"""A child process for the tests: runs $CHILD_SETUP (Python statements), then
answers the test on stdin/stdout, one line each way: a line is evaluated as an
expression (or run as statements after "exec "), and the answer is its JSON.
"quit" (or EOF) ends it."""
import json
import os
import sys

if os.environ.get("CHILD_NO_TORCH"):
    sys.modules["torch"] = None  # as if torch were not installed, even where it is

exec(os.environ.get("CHILD_SETUP", ""))

for line in sys.stdin:
    cmd = line.strip()
    if cmd == "quit":
        break
    try:
        if cmd.startswith("exec "):
            exec(cmd[5:])
            result = None
        else:
            result = eval(cmd)
    except BaseException as e:
        result = {"error": "%s: %s" % (type(e).__name__, e)}
    sys.stdout.write(json.dumps(result, default=repr) + "\n")
    sys.stdout.flush()
