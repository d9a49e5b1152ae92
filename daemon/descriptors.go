package daemon

import "fmt"

// Descriptors the daemon keeps for itself and its owner, whatever the other
// listeners hold: the store's files, NVML, the listeners themselves
// (baseDescriptors), and the owner's Unix socket connections, imports and
// agents' hand-overs (ownerReserve: a quarter of the limit, at least 16).
// The campaign's keep-alive connections to the metrics port took 20,000 of
// 20,000 descriptors and the owner's status timed out.
const (
	baseDescriptors = 16
	minOwnerReserve = 16
)

// exportMaxConns is the metrics listener's connection cap before the
// descriptor budget: Prometheus holds one connection per scraper, pprof one
// per profile fetch.
const exportMaxConns = 64

// budget is how many connections each listener other than the Unix socket
// may hold, sized from the file descriptor limit.
type budget struct {
	nofile  int // RLIMIT_NOFILE, the soft limit (Go raises it to the hard one)
	reserve int // kept for the owner
	tcp     TCPLimits
	export  int // metrics connections
}

// sizeBudget fits TCP's limits and the metrics cap into what nofile leaves
// once the owner's reserve is set aside, lowering each where it must; it
// refuses a limit too low to serve anything (0: unknown, nothing lowered).
func sizeBudget(nofile int, lim TCPLimits) (budget, error) {
	b := budget{nofile: nofile, tcp: lim, export: exportMaxConns}
	if nofile <= 0 {
		return b, nil
	}
	b.reserve = max(minOwnerReserve, nofile/4)
	spare := nofile - baseDescriptors - b.reserve
	if spare < 4 {
		return b, fmt.Errorf("the daemon may open %d file descriptors (ulimit -n); it needs at least %d: raise the limit", nofile, baseDescriptors+minOwnerReserve+4)
	}
	// Shares of what is spare: pending TCP a quarter, authenticated TCP a
	// half, metrics a quarter (each at least 1).
	b.tcp.Pending = min(lim.Pending, max(1, spare/4))
	b.tcp.PendingPeer = min(lim.PendingPeer, b.tcp.Pending)
	b.tcp.Authed = min(lim.Authed, max(1, spare/2))
	b.export = min(exportMaxConns, max(1, spare/4))
	return b, nil
}

func (b budget) String() string {
	return fmt.Sprintf("%d file descriptors: %d kept for the owner's socket and the store; TCP %d waiting for hello (%d a user) and %d past it, metrics %d",
		b.nofile, b.reserve+baseDescriptors, b.tcp.Pending, b.tcp.PendingPeer, b.tcp.Authed, b.export)
}
