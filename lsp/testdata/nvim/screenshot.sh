#!/bin/sh
# Renders Neovim running session.lua (the state after its edits: hints and the
# OOM's diagnostic on their moved statements) to a PNG: Neovim in a tmux pane,
# tmux capture-pane with colours, the colours as HTML, chromium's screenshot.
#   sh lsp/testdata/nvim/screenshot.sh OUT_DIR [edited]   (after go build -o bin/vramscope ./cmd/vramscope)
# "edited" also edits the hinted line itself: its hint says "(before edit)".
set -eu
out=${1:-test-artifacts/nvim}
mode=${2:-1}
name=hints-after-edit
[ "$mode" = edited ] && name=hints-edited-line
root=$(cd "$(dirname "$0")/../../.." && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d)
trap 'tmux kill-session -t vsshot 2>/dev/null || true; rm -rf "$tmp"' EXIT
nvim=${VRAMSCOPE_NVIM:-$root/.venv/bin/nvim}
cd "$root/lsp"
tmux new-session -d -s vsshot -x 150 -y 42 \
  "env VRAMSCOPE_STAY=$mode VRAMSCOPE_BIN=$root/bin/vramscope VRAMSCOPE_FIXTURES=${VRAMSCOPE_SHARED:-$root/../shared}/fixtures \
   VRAMSCOPE_RESULT=$tmp/result.json XDG_CACHE_HOME=$tmp XDG_STATE_HOME=$tmp XDG_CONFIG_HOME=$tmp XDG_DATA_HOME=$tmp \
   TERM=tmux-256color $nvim --clean -u NONE -c 'set termguicolors' -c 'luafile testdata/nvim/session.lua'"
for _ in $(seq 120); do [ -s "$tmp/result.json" ] && break; sleep 0.5; done
sleep 2
tmux capture-pane -t vsshot -p > "$out/$name.txt"
tmux capture-pane -t vsshot -e -p > "$tmp/pane.ansi"
cp "$tmp/result.json" "$out/$name.result.json"
python3 "$root/lsp/testdata/nvim/ansi2html.py" < "$tmp/pane.ansi" > "$out/$name.html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1240,760 \
  --screenshot="$out/$name.png" "file://$out/$name.html" 2>/dev/null
echo "$out/$name.png"
