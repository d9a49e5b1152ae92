# Sourced by the device scripts here (run from the repository root, $OUT the folder that comes back):
# unpacks the carried binary (.gpu/vramscope.gz) as $B, starts its daemon on a fresh socket ($D/s,
# exported as VRAMSCOPE_SOCKET; its log $OUT/daemon.log, its pid $DPID) and puts the agent's package
# on PYTHONPATH. Before a call, build the binary here (the device has no Go):
#   mkdir -p .gpu /tmp/gpubin && go build -ldflags "-s -w" -o /tmp/gpubin/vramscope ./cmd/vramscope \
#     && gzip -9 -c /tmp/gpubin/vramscope > .gpu/vramscope.gz   (.gpu/ listed in .git/info/exclude)
gunzip -kf .gpu/vramscope.gz; chmod +x .gpu/vramscope; B=$PWD/.gpu/vramscope
export PYTHONPATH=$PWD/jupyter PYTHONUNBUFFERED=1
D=$(mktemp -d /tmp/vsd.XXXX)
$B serve --socket $D/s --data-dir $D/data > $OUT/daemon.log 2>&1 &
DPID=$!
sleep 1
export VRAMSCOPE_SOCKET=$D/s
