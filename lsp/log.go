package lsp

import (
	"fmt"
	"sync"
	"time"
)

// serverLog is the server's log. Lines reach Config.Logf (stderr) from a
// goroutine of its own through a queue, so an editor that never reads the
// server's stderr cannot block a request: once the pipe and the queue are
// full, lines are dropped and counted, and the count is logged when the
// writer catches up. Errors of notifications, which cannot be answered, are
// logged once per method and interval with a count of the rest: 20,000
// malformed $/cancelRequest wrote 9,998 lines and, with stderr unread,
// blocked the server.
type serverLog struct {
	out      chan string
	interval time.Duration // logInterval; shorter in tests
	mu       sync.Mutex
	dropped  int                   // lines dropped since the last one queued
	methods  map[string]*methodLog // by notification method
}

type methodLog struct {
	last  time.Time
	more  int
	timer *time.Timer
}

const (
	logQueue    = 256              // lines waiting for stderr
	logInterval = 10 * time.Second // one line per notification method and interval
)

func newServerLog(logf func(format string, args ...any)) *serverLog {
	l := &serverLog{out: make(chan string, logQueue), interval: logInterval, methods: map[string]*methodLog{}}
	go func() {
		for line := range l.out {
			logf("%s", line)
		}
	}()
	return l
}

// printf queues a line; it never waits.
func (l *serverLog) printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped > 0 {
		line = fmt.Sprintf("%s (%d earlier log lines dropped: stderr was not read)", line, l.dropped)
	}
	select {
	case l.out <- line:
		l.dropped = 0
	default:
		l.dropped++
	}
}

// notifyError logs an error of a notification: the first of its method in
// an interval now, the others as one count at the interval's end.
func (l *serverLog) notifyError(method string, err error) {
	l.mu.Lock()
	m := l.methods[method]
	if m == nil {
		m = &methodLog{}
		l.methods[method] = m
	}
	now := time.Now()
	if now.Sub(m.last) >= l.interval {
		m.last = now
		l.mu.Unlock()
		l.printf("%s: %v", method, err)
		return
	}
	m.more++
	if m.timer == nil {
		m.timer = time.AfterFunc(l.interval-now.Sub(m.last), func() { l.flush(method) })
	}
	l.mu.Unlock()
}

// flush logs how many errors of method were not logged.
func (l *serverLog) flush(method string) {
	l.mu.Lock()
	m := l.methods[method]
	n := m.more
	m.more, m.timer, m.last = 0, nil, time.Now()
	l.mu.Unlock()
	if n > 0 {
		l.printf("%s: %d more errors like the last in %s", method, n, l.interval)
	}
}
