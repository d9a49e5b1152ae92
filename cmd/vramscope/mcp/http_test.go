package mcp_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveHTTP starts `vramscope mcp --http 127.0.0.1:0` and returns its URL
// and the token it wrote.
func serveHTTP(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	tokFile := filepath.Join(dir, "tok")
	cmd := exec.Command(bin, "mcp", "--socket", filepath.Join(dir, "none.sock"), "--http", "127.0.0.1:0", "--token-file", tokFile)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil {
		t.Fatalf("vramscope mcp --http said nothing: %v", err)
	}
	url := strings.Fields(line[strings.Index(line, "http://"):])[0]
	tok, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(tokFile); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v", fi.Mode().Perm())
	}
	return url, strings.TrimSpace(string(tok))
}

// bearer adds the token to every request of the SDK's HTTP client.
type bearer struct{ tok string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.tok)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHTTPNeedsToken: over loopback HTTP a request without the token (or
// with a wrong one) is refused with 401; the SDK's client with the token
// runs a tool.
func TestHTTPNeedsToken(t *testing.T) {
	url, tok := serveHTTP(t)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, auth := range []string{"", "Bearer " + strings.Repeat("0", 64)} {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401", auth, resp.StatusCode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{tok}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	file, _ := filepath.Abs("../../../examples/snapshots/agent_oom.pickle")
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "analyze_snapshot", Arguments: map[string]any{"snapshot": file}})
	if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "cause: large_allocation") {
		t.Errorf("analyze_snapshot over HTTP: %v %+v", err, res)
	}
}

// TestHTTPLoopbackOnly: another address is refused, naming the flag.
func TestHTTPLoopbackOnly(t *testing.T) {
	out, err := exec.Command(bin, "mcp", "--socket", filepath.Join(t.TempDir(), "s"), "--http", "0.0.0.0:0").CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), `--http "0.0.0.0:0": only loopback`) {
		t.Errorf("exit %d: %s", code, out)
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return 0
}
