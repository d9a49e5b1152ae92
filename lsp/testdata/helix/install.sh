#!/bin/sh
# Installs Helix 25.01.1 for lsp/helix_test.go into DIR (default .helix):
# Debian 13's hx package, from Debian's mirror with apt's own signature check.
# No package registry this project uses has a Helix for Debian 12: PyPI, npm
# and the Go proxy have none; crates.io has only a placeholder (helix-term
# 0.0.0) and Helix's source is not published there; bookworm and
# bookworm-backports have no hx (docs/editors.md). Debian 13's hx needs glibc
# 2.39 (Debian 12 has 2.36), so Debian 13's libc6 comes too, unpacked beside it
# (nothing is installed on the system) and DIR/hx runs Helix through that
# libc's loader. make setup runs it; it does nothing when DIR/hx runs already.
# Not pinned: Debian's mirror keeps only a release's current versions (libc6
# gets security updates), so this takes trixie's current hx (25.01.1-4 on
# 2026-12-02) and libc6.
set -eu
dir=${1:-.helix}
if [ -x "$dir/hx" ] && "$dir/hx" --version 2>/dev/null | grep -q '^helix '; then
  echo "helix: installed ($dir)"
  exit 0
fi
[ "$(uname -m)" = x86_64 ] || { echo "helix: this installs Debian's amd64 hx only" >&2; exit 1; }
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
apt="$dir/apt"
rm -rf "$apt" "$dir/root"
mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dir/root"
echo 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main' >"$apt/sources.list"
# A private apt state: the system's sources and package lists stay as they are.
set -- -o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
  -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root
apt-get "$@" update -qq
(cd "$apt" && apt-get "$@" download hx libc6 >/dev/null && ls ./*.deb)
for deb in "$apt"/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
rm -rf "$apt"
cat >"$dir/hx" <<'EOF'
#!/bin/sh
# Debian 13's Helix through Debian 13's loader and libc (lsp/testdata/helix/install.sh).
root=$(dirname "$(readlink -f "$0")")/root
lib=$root/usr/lib/x86_64-linux-gnu
export HELIX_RUNTIME="${HELIX_RUNTIME:-$root/usr/lib/hx/runtime}"
exec "$lib/ld-linux-x86-64.so.2" --library-path "$lib" "$root/usr/lib/hx/hx" "$@"
EOF
chmod +x "$dir/hx"
"$dir/hx" --version
