package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
)

// reply is one message the daemon wrote.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// readReply reads the daemon's next message, or fails the test.
func readReply(t *testing.T, r *bufio.Reader, c net.Conn) reply {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("no reply: %v (read %q)", err, line)
	}
	var rep reply
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		t.Fatalf("reply %q: %v", line, err)
	}
	return rep
}

// closed says whether the daemon closed c (its next read ends) rather than
// going on serving it.
func closed(t *testing.T, r *bufio.Reader, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := r.ReadByte()
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return err != nil
}

// TestMalformedMessagesAnswered sends each hostile message of testdata/wire
// on its own connection: the daemon answers every one with the JSON-RPC
// code that says what is wrong, then closes the connection when it cannot
// find the next message (not JSON) and serves on when it can.
func TestMalformedMessagesAnswered(t *testing.T) {
	want := map[string]struct {
		code   int64 // 0: an ordinary answer
		id     string
		closes bool
		says   string
	}{
		"garbage.txt":          {api.CodeParse, "null", true, "'g' cannot start"},
		"nul_ff.bin":           {api.CodeParse, "null", true, `'\x00' cannot start`},
		"scalar.json":          {api.CodeInvalidRequest, "null", true, "JSON object"},
		"trailing_comma.json":  {api.CodeParse, "null", true, "parse error"},
		"deep_nesting.json":    {api.CodeParse, "null", true, "depth"},
		"method_number.json":   {api.CodeInvalidRequest, "3", false, `"method" must be a string`},
		"batch.json":           {api.CodeInvalidRequest, "null", false, "batches are not supported"},
		"neither.json":         {api.CodeInvalidRequest, "4", false, "a method"},
		"both.json":            {api.CodeInvalidRequest, "6", false, "not both"},
		"id_object.json":       {api.CodeInvalidRequest, "null", false, `"id" must be`},
		"id_float.json":        {api.CodeInvalidRequest, "null", false, `"id" must be`},
		"newlines_inside.json": {0, "8", false, ""},
		"newline_flood.json":   {0, "1", false, ""}, // as stored, a small hello
	}
	_, cfg := testDaemon(t)
	files, _ := filepath.Glob("testdata/wire/*")
	if len(files) != len(want) {
		t.Errorf("%d files in testdata/wire, %d expectations", len(files), len(want))
	}
	for _, f := range files {
		w, ok := want[filepath.Base(f)]
		if !ok {
			t.Errorf("%s: no expectation", f)
			continue
		}
		msg, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("unix", cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		c.Write(msg)
		rep := readReply(t, r, c)
		code := int64(0)
		if rep.Error != nil {
			code = rep.Error.Code
		}
		if code != w.code || string(rep.ID) != w.id {
			t.Errorf("%s: answered %+v (id %s), want code %d id %s", f, rep.Error, rep.ID, w.code, w.id)
		} else if w.says != "" && !strings.Contains(rep.Error.Message, w.says) {
			t.Errorf("%s: %q does not say %q", f, rep.Error.Message, w.says)
		}
		if !w.closes {
			c.Write([]byte(`{"jsonrpc":"2.0","id":"next","method":"daemon.status"}` + "\n"))
			if rep := readReply(t, r, c); rep.Error != nil || string(rep.ID) != `"next"` {
				t.Errorf("%s: the next request got %+v", f, rep)
			}
		} else if !closed(t, r, c) {
			t.Errorf("%s: the connection stays open", f)
		}
		c.Close()
	}
}

// flood is the message of testdata/wire/newline_flood.json grown to about n
// bytes by repeating its "0," line: JSON that is a newline every 3 bytes, as
// a peer sends to get past a per-line limit.
func flood(t *testing.T, n int) []byte {
	b, err := os.ReadFile("testdata/wire/newline_flood.json")
	if err != nil {
		t.Fatal(err)
	}
	head, tail, ok := bytes.Cut(b, []byte("\n0,\n"))
	if !ok {
		t.Fatal("newline_flood.json has no \\n0,\\n line to repeat")
	}
	var out bytes.Buffer
	out.Write(head)
	for out.Len() < n {
		out.WriteString("\n0,")
	}
	out.WriteString("\n")
	out.Write(tail)
	return out.Bytes()
}

// sendAll writes msg in the background (the daemon may stop reading it) and
// returns the connection's reader.
func sendAll(c net.Conn, msg []byte) *bufio.Reader {
	go func() {
		c.SetWriteDeadline(time.Now().Add(20 * time.Second))
		c.Write(msg)
	}()
	return bufio.NewReader(c)
}

// TestLimitCountsMessagesNotLines: before daemon.hello on TCP a message may
// have MaxHelloBytes, however many newlines it holds; the daemon answers
// -32009 and closes without reading (or decoding) the rest.
func TestLimitCountsMessagesNotLines(t *testing.T) {
	d, _ := testDaemon(t, func(c *Config) { c.TCP = "127.0.0.1:0" })
	c, err := net.Dial("tcp", d.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := sendAll(c, flood(t, 8<<20))
	rep := readReply(t, r, c)
	if rep.Error == nil || rep.Error.Code != api.CodeTooLarge || !strings.Contains(rep.Error.Message, fmt.Sprint(api.MaxHelloBytes)) {
		t.Errorf("an 8 MiB hello with a newline every 3 bytes: %+v, want -32009 naming %d", rep.Error, api.MaxHelloBytes)
	}
	if !closed(t, r, c) {
		t.Error("the connection stays open")
	}
}

// TestLimitPerMethod: on the Unix socket an ordinary request may have
// MaxMessageBytes and agent.register MaxRegisterBytes; a longer one is
// answered -32009 and the connection goes on, one past the largest limit
// is not read further and its connection is closed.
func TestLimitPerMethod(t *testing.T) {
	_, cfg := testDaemon(t)
	c, err := net.Dial("unix", cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := func(method string, n int) []byte {
		return []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%q,"method":%q,"params":{"pad":"%s"}}`+"\n", method, method, strings.Repeat("x", n)))
	}
	r := sendAll(c, big(api.Status, api.MaxMessageBytes))
	if rep := readReply(t, r, c); rep.Error == nil || rep.Error.Code != api.CodeTooLarge || !strings.Contains(rep.Error.Message, "daemon.status") {
		t.Errorf("daemon.status of %d bytes: %+v", api.MaxMessageBytes, rep.Error)
	}
	argv := make([]string, 20000)
	for i := range argv {
		argv[i] = strings.Repeat("a", 100) // 2 MB of argv, as a long torchrun line could
	}
	reg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "reg", "method": api.AgentRegister,
		"params": api.RegisterParams{PID: 4343, Argv: argv, Device: -1, APIVersion: api.Version}})
	r2 := sendAll(c, append(reg, '\n'))
	if rep := readReply(t, r2, c); rep.Error != nil {
		t.Errorf("agent.register of %d bytes: %+v", len(reg), rep.Error)
	}
	r3 := sendAll(c, big(api.AgentRegister, api.MaxRegisterBytes))
	if rep := readReply(t, r3, c); rep.Error == nil || rep.Error.Code != api.CodeTooLarge {
		t.Errorf("agent.register past %d bytes: %+v", api.MaxRegisterBytes, rep.Error)
	}
	if !closed(t, r3, c) {
		t.Error("the connection stays open past the largest limit")
	}
	dial(t, cfg.Socket) // and the daemon serves the next one
}
