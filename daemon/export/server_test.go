package export

import (
	"net"
	"strings"
	"testing"
)

// TestListenLoopbackOnly: the metrics listener answers without a token, so
// it binds loopback unless --metrics-public says otherwise.
func TestListenLoopbackOnly(t *testing.T) {
	for _, bad := range []string{"0.0.0.0:0", "192.0.2.1:9464", "example.com:9464", "[::]:0"} {
		if _, err := Listen(Config{Addr: bad}); err == nil || !strings.Contains(err.Error(), "--metrics-public") {
			t.Errorf("Listen(%s): %v", bad, err)
		}
	}
	l, err := Listen(Config{Addr: ":0"})
	if err != nil {
		t.Fatal(err)
	}
	if ip := l.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		t.Errorf(":0 bound %s, want loopback", ip)
	}
	l.Close()
	// Public lets a non-loopback address through to the kernel (this one is
	// not on the machine, so nothing is bound).
	if _, err := Listen(Config{Addr: "192.0.2.1:9464", Public: true}); err == nil || strings.Contains(err.Error(), "--metrics-public") {
		t.Errorf("public: %v", err)
	}
}
