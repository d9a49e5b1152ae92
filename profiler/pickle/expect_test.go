package pickle

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bigInt parses a decimal integer for expectations.
func bigInt(s string) *big.Int {
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic("bad big int " + s)
	}
	return b
}

// pow2 is ±2**n as a *big.Int.
func pow2(n uint, neg bool) *big.Int {
	b := new(big.Int).Lsh(big.NewInt(1), n)
	if neg {
		b.Neg(b)
	}
	return b
}

// plainDiff compares a Plain() result with an expectation and names the first
// difference ("" when equal). Floats compare by bits (so -0.0 is not 0.0) and
// NaN equals NaN; big ints by value; an int64 never equals a *big.Int.
func plainDiff(path string, got, want any) string {
	switch w := want.(type) {
	case nil:
		if got != nil {
			return fmt.Sprintf("%s: got %T %v, want None", path, got, got)
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Sprintf("%s: got %T, want a list", path, got)
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%s: got %d items, want %d", path, len(g), len(w))
		}
		for i := range w {
			if d := plainDiff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i]); d != "" {
				return d
			}
		}
		return ""
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: got %T, want a dict", path, got)
		}
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s: key %q missing", path, k)
			}
			if d := plainDiff(path+"."+k, gv, w[k]); d != "" {
				return d
			}
		}
		if len(g) != len(w) {
			return fmt.Sprintf("%s: got %d keys, want %d", path, len(g), len(w))
		}
		return ""
	case *big.Int:
		g, ok := got.(*big.Int)
		if !ok || g.Cmp(w) != 0 {
			return fmt.Sprintf("%s: got %T %v, want big int %v", path, got, got, w)
		}
		return ""
	case float64:
		g, ok := got.(float64)
		if !ok {
			return fmt.Sprintf("%s: got %T %v, want float %v", path, got, got, w)
		}
		if math.Float64bits(g) != math.Float64bits(w) && !(math.IsNaN(g) && math.IsNaN(w)) {
			return fmt.Sprintf("%s: got float %v (bits %x), want %v (bits %x)", path, g, math.Float64bits(g), w, math.Float64bits(w))
		}
		return ""
	case []byte:
		g, ok := got.([]byte)
		if !ok || !bytes.Equal(g, w) {
			return fmt.Sprintf("%s: got %T %q, want bytes %q", path, got, got, w)
		}
		return ""
	case int:
		return plainDiff(path, got, int64(w))
	}
	if fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) || got != want {
		return fmt.Sprintf("%s: got %T %#v, want %T %#v", path, got, short(got), want, short(want))
	}
	return ""
}

func short(v any) any {
	if s, ok := v.(string); ok && len(s) > 80 {
		return s[:80] + "..."
	}
	return v
}

// pickleErr asserts err is a *Error whose message contains want, and returns it.
func pickleErr(t *testing.T, err error, want string) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *pickle.Error", err, err)
	}
	if !strings.Contains(pe.Msg, want) {
		t.Fatalf("error %q does not contain %q", err, want)
	}
	return pe
}

// decodeNoPanic runs Decode and turns a panic into a test failure.
func decodeNoPanic(t *testing.T, b []byte, lim Limits) (v Value, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			buf := make([]byte, 8<<10)
			buf = buf[:runtime.Stack(buf, false)]
			t.Fatalf("Decode panicked on %d bytes %q...: %v\n%s", len(b), b[:min(len(b), 32)], r, buf)
		}
	}()
	return Decode(b, lim)
}

// peakHeap runs f and returns the highest HeapAlloc seen while it ran, above
// the heap in use before it started. HeapAlloc is sampled every millisecond,
// and once more as f returns (before a collection can drop what f built).
// The collector runs at GOGC=50 meanwhile, so garbage awaiting collection
// inflates the figure by at most half of what f keeps live.
func peakHeap(f func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(50))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	note := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		for {
			p := peak.Load()
			if ms.HeapAlloc <= p || peak.CompareAndSwap(p, ms.HeapAlloc) {
				return
			}
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				note()
			}
		}
	}()
	f()
	note()
	close(stop)
	<-done
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Small builders for hand-assembled pickles.
func u32(n uint32) string { return string(binary.LittleEndian.AppendUint32(nil, n)) }
func u64(n uint64) string { return string(binary.LittleEndian.AppendUint64(nil, n)) }

var casesDir = filepath.Join("testdata", "cases")
