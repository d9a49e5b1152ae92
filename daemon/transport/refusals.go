package transport

import (
	"encoding/json"
	"net"
	"sync"
	"time"
)

// RefusalLog logs refused connections at most once a second, with the number
// refused since the last line: a peer opening connections as fast as it can
// must not fill the log (or the disk under it) as well.
type RefusalLog struct {
	mu     sync.Mutex
	last   time.Time
	missed int
}

// Note logs err as a refusal, or counts it when a line went out less than a
// second ago.
func (r *RefusalLog) Note(logf func(string, ...any), err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.last) < time.Second {
		r.missed++
		return
	}
	if r.missed > 0 {
		logf("refused: %v (and %d more refused in the last second)", err, r.missed)
	} else {
		logf("refused: %v", err)
	}
	r.last, r.missed = time.Now(), 0
}

// Refuse tells a connection the daemon will not serve why, and closes it.
func Refuse(c net.Conn, code int64, why string) {
	msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": code, "message": why}})
	c.SetWriteDeadline(time.Now().Add(lingerTime)) // a peer that does not read must not hold the accept loop
	c.Write(append(msg, '\n'))
	c.Close()
}
