package daemon

import (
	"sync"
	"time"
)

// refusalLog logs refused connections at most once a second, with the number
// refused since the last line: a peer opening connections as fast as it can
// must not fill the log (or the disk under it) as well.
type refusalLog struct {
	mu     sync.Mutex
	last   time.Time
	missed int
}

func (r *refusalLog) note(logf func(string, ...any), err error) {
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
