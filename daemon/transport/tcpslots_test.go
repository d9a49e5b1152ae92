package transport

import (
	"errors"
	"net"
	"strings"
	"testing"
)

// loopbackPair is a real loopback TCP connection: the server's end, as
// Accept returns it (what Slots counts), and the client's.
func loopbackPair(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestSlotsEvictPromoteRelease: a peer at PendingPeer loses its oldest
// pending connection to a newcomer, which is told why; an evicted slot cannot
// be promoted; past Authed, Promote is an ErrBusy; released slots come back.
func TestSlotsEvictPromoteRelease(t *testing.T) {
	l, err := ListenTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	slots := NewSlots(Limits{PendingPeer: 2, Pending: 8, Authed: 1})
	var told []string
	admit := func() *Slot {
		s, _ := slots.Admit(loopbackPair(t, l), func(why string) { told = append(told, why) })
		return s
	}
	first, second := admit(), admit()
	third := admit() // the same user (one uid on loopback): evicts the oldest
	if len(told) != 1 || !strings.Contains(told[0], "(the limit for one user)") {
		t.Fatalf("a third connection of one peer at PendingPeer 2: told %q", told)
	}
	if p, a := slots.Counts(); p != 2 || a != 0 {
		t.Errorf("after the eviction: %d pending %d authed, want 2 0", p, a)
	}
	if err := slots.Promote(first); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "closed to make room") {
		t.Errorf("promoting the evicted slot: %v", err)
	}
	if err := slots.Promote(second); err != nil {
		t.Fatal(err)
	}
	if err := slots.Promote(third); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "1 TCP connections are open already") {
		t.Errorf("promoting past Authed 1: %v", err)
	}
	slots.Release(second)
	if err := slots.Promote(third); err != nil {
		t.Errorf("promoting once a slot came back: %v", err)
	}
	slots.Release(third)
	slots.Release(first) // evicted: holds nothing, gives back nothing
	if p, a := slots.Counts(); p != 0 || a != 0 {
		t.Errorf("all released: %d pending %d authed", p, a)
	}
}
