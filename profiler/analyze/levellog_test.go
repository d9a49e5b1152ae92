package analyze

import (
	"math/rand"
	"testing"
)

// The level log gives back every entry as added, at any distance in time
// (a trace of days, beyond the 71 minutes uint32 microseconds held) and any
// level (beyond the ±1 TiB an int32 of 512-byte units held), read in order,
// backwards or at random, and search finds the last entry at or before a time.
func TestLevelLogRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var l levelLog
	var want []logEntry
	var now, cur int64
	for i := 0; i < 100_000; i++ {
		switch rng.Intn(100) {
		case 0:
			now += 3 * 3600 * 1_000_000 // three hours of nothing
		case 1:
			cur += 3 << 40 // a 3 TiB level
		default:
			now += rng.Int63n(2000)
		}
		e := logEntry{t: now, cur: cur + 512*rng.Int63n(1<<20)}
		if i == 0 || rng.Intn(2) == 0 {
			e.stack = 1 + uint32(rng.Intn(100_000)) // an allocation
		} else if rng.Intn(4) > 0 {
			e.back = 1 + rng.Intn(i) // a free of a logged allocation (else of a pre-trace block)
		}
		l.add(e)
		want = append(want, e)
	}
	if l.len() != len(want) {
		t.Fatalf("len %d, want %d", l.len(), len(want))
	}
	for i := len(want) - 1; i >= 0; i-- {
		if got := l.at(i); got != want[i] {
			t.Fatalf("backwards: entry %d = %+v, want %+v", i, got, want[i])
		}
	}
	for k := 0; k < 20_000; k++ {
		i := rng.Intn(len(want))
		if got := l.at(i); got != want[i] {
			t.Fatalf("random: entry %d = %+v, want %+v", i, got, want[i])
		}
		q := want[i].t + rng.Int63n(3) - 1
		j := l.search(q)
		if (j >= 0 && want[j].t > q) || (j+1 < len(want) && want[j+1].t <= q) {
			t.Fatalf("search(%d) = %d", q, j)
		}
	}
	if l.search(-1) != -1 {
		t.Error("search before the first entry should find none")
	}
}
