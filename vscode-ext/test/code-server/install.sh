#!/bin/sh
# Installs code-server 4.100.3 (VS Code 1.100.3; the last release for Node 20)
# from package-lock.json here, for vscode-ext/test/e2e.test.mjs. `make setup`
# runs it; it does nothing when node_modules already matches the lockfile.
#
# code-server's postinstall runs `npm install` inside the package for VS Code's
# own dependencies, building native modules with node-gyp. What that needs here:
#   - Debian's libkrb5-dev (kerberos) and ripgrep (make setup installs both);
#   - Node's headers: npm_config_nodedir points node-gyp at the installed ones
#     (include/node beside the node binary) instead of downloading them;
#   - npm_config_yes: node-pty's post-install runs `npx node-gyp`, which would
#     otherwise stop to ask;
#   - npm_config_unsafe_perm: the postinstall refuses to run as root without it;
#   - ripgrep: @vscode/ripgrep's postinstall downloads rg from GitHub, which is
#     not reachable. It first looks in $TMPDIR/vscode-ripgrep-cache-VERSION/ for
#     the release archive, so that cache is seeded with Debian's rg, and VS Code
#     ends up with node_modules/@vscode/ripgrep/bin/rg = /usr/bin/rg.
# Install scripts allowed (npm 11's allowScripts, package.json): code-server and
# argon2; the nested install is code-server's own project.
set -eu
cd "$(dirname "$0")"
stamp=node_modules/.vramscope-installed
if [ -f "$stamp" ] && cmp -s package-lock.json "$stamp" && [ -x node_modules/code-server/lib/vscode/node_modules/@vscode/ripgrep/bin/rg ]; then
  echo "code-server: installed (vscode-ext/test/code-server)"
  exit 0
fi
rg=$(command -v rg) || { echo "code-server needs ripgrep: apt-get install ripgrep" >&2; exit 1; }
[ -e /usr/include/krb5.h ] || { echo "code-server needs libkrb5-dev: apt-get install libkrb5-dev" >&2; exit 1; }

# The versions code-server 4.100.3 pins: @vscode/ripgrep in lib/vscode/npm-shrinkwrap.json,
# and the ripgrep release its lib/postinstall.js fetches.
RG_PKG=1.15.11
RG_TAG=v13.0.0-10
case "$(uname -m)" in
  x86_64) target=x86_64-unknown-linux-musl ;;
  aarch64) target=aarch64-unknown-linux-musl ;;
  *) echo "code-server e2e: unsupported machine $(uname -m)" >&2; exit 1 ;;
esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/vscode-ripgrep-cache-$RG_PKG" "$tmp/stage"
cp "$rg" "$tmp/stage/rg"
tar czf "$tmp/vscode-ripgrep-cache-$RG_PKG/ripgrep-$RG_TAG-$target.tar.gz" -C "$tmp/stage" rg

nodedir=$(dirname "$(dirname "$(command -v node)")")
if [ -e "$nodedir/include/node/node.h" ]; then
  npm_config_nodedir=$nodedir
  export npm_config_nodedir
fi
TMPDIR=$tmp npm_config_yes=true npm_config_unsafe_perm=true npm ci --no-audit --no-fund --loglevel=error

got=node_modules/code-server/lib/vscode/node_modules/@vscode/ripgrep/bin/rg
cmp -s "$got" "$rg" || { echo "code-server: $got is not Debian's rg" >&2; exit 1; }
cp package-lock.json "$stamp"
echo "code-server: installed (vscode-ext/test/code-server)"
