#!/bin/sh
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned in package.json) against `vramscope mcp --http` on a loopback port,
# with the token in the URL, and fails on any failure not listed in
# expected-failures.yml (or on a listed one that passes). make test-mcp runs it.
# Usage: run.sh BIN OUTDIR
set -eu
bin=$1 out=$2
dir=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
"$bin" mcp --socket "$tmp/sock" --http 127.0.0.1:0 --token-file "$tmp/token" 2>"$tmp/log" &
pid=$!
for _ in $(seq 50); do grep -q serving "$tmp/log" && break; sleep 0.1; done
url=$(sed -n 's/.*serving \(http:[^ ]*\).*/\1/p' "$tmp/log")
[ -n "$url" ] || { cat "$tmp/log" >&2; echo "vramscope mcp --http did not start" >&2; exit 1; }
mkdir -p "$out"
rc=0
npx --no-install conformance server --url "$url?token=$(cat "$tmp/token")" \
  --expected-failures "$dir/expected-failures.yml" -o "$out" >"$tmp/out" 2>&1 || rc=$?
# With every failure expected, the counts say so: a bare "N passed, M failed"
# line would read to CI as M failing tests.
if [ $rc -eq 0 ]; then
  sed -n '/=== SUMMARY ===/,$p' "$tmp/out" | sed 's/\([0-9][0-9]*\) failed$/\1 failed as expected-failures.yml lists/'
else
  sed -n '/=== SUMMARY ===/,$p' "$tmp/out"
fi
exit $rc
