// Package transport is how a peer reaches the daemon and proves who it is:
// the Unix socket (mode 0600, SO_PEERCRED's uid) and the loopback TCP
// listener with its token (listen.go, token.go, peercred_*.go), the TCP
// listener's slots that keep peers without the token from exhausting it
// (tcpslots.go, tcpuid_*.go, inq_*.go), the file descriptor budget that
// sizes them (descriptors*.go), and the JSON-RPC stream each connection is
// read through: framing, envelope checks and the size limits of daemon/api
// (wire.go, wireframe.go, params.go). It knows nothing of sessions, agents
// or snapshots; the daemon composes it. Its refusals are answered on the
// wire here (a connection that cannot be served); errors a handler meets
// are domain errors (ErrBusy, ErrOtherUser) the daemon maps to codes.
package transport
