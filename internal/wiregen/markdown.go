package wiregen

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/vramscope/vramscope/daemon/api"
)

// markdown renders docs/api.md: the framing, the error codes, the methods and
// each method's parameter and result types with their fields' comments.
func (c *contract) markdown() string {
	var b strings.Builder
	b.WriteString("# vramscope daemon API\n\n")
	b.WriteString("Generated from `daemon/api` (its Go types and their comments) by `make generate` (`go generate ./daemon/api`), which also writes " +
		"`jupyter/vramscope/_api.py` and `vscode-ext/src/api.ts`; `go test ./internal/wiregen` fails when any of them is stale. " +
		"Do not edit it: edit the Go source and its comments, then run `make generate`. ")
	fmt.Fprintf(&b, "API version **%s**.\n\n", api.Version)
	b.WriteString(strings.TrimSpace(`
JSON-RPC 2.0, one message per line (UTF-8 JSON and "\n"). The daemon listens on a Unix socket,
$VRAMSCOPE_SOCKET or $XDG_RUNTIME_DIR/vramscope/daemon.sock (else ~/.cache/vramscope/daemon.sock),
mode 0600 in a 0700 directory, and refuses connections from other users (SO_PEERCRED). With
--tcp 127.0.0.1:PORT it also listens on loopback; a TCP connection must call daemon.hello with the
token from the token file beside the socket before anything else. Agents (the Python package in
jupyter/) use the same socket: they call agent.register and then answer agent.dump.`))
	fmt.Fprintf(&b, "\n\nA message may be at most %s on TCP until daemon.hello has proved the token, else %s\n"+
		"(%s for agent.register, which carries argv), newlines inside it included; a longer one is\n"+
		"answered with %d. A message that is not JSON is answered with %d and its connection\n"+
		"closed; JSON that is not a request or response (a batch, a method that is not a string) with %d.\n"+
		"docs/security.md says what else bounds a connection (time to say hello, connections per peer).",
		kib(api.MaxHelloBytes), kib(api.MaxMessageBytes), kib(api.MaxRegisterBytes),
		api.CodeTooLarge, api.CodeParse, api.CodeInvalidRequest)
	b.WriteString("\n\n## Errors\n\n| code | meaning |\n|---|---|\n")
	for _, e := range c.codes {
		fmt.Fprintf(&b, "| %s | %s |\n", e.Value.ExactString(), cell(e.Comment))
	}
	b.WriteString("\n## Methods\n\n| method | direction | summary |\n|---|---|---|\n")
	for _, m := range api.Methods {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", m.Name, strings.ReplaceAll(m.Name, ".", ""), m.Dir, cell(m.Doc))
	}
	for _, m := range api.Methods {
		fmt.Fprintf(&b, "\n### %s\n\n%s — %s\n\n", m.Name, m.Dir, m.Doc)
		c.writeType(&b, "Params", m.Params)
		c.writeType(&b, "Result", m.Result)
	}
	return b.String()
}

func (c *contract) writeType(b *strings.Builder, label string, v any) {
	switch v := v.(type) {
	case nil:
		if label == "Params" {
			fmt.Fprintf(b, "%s: none.\n\n", label)
		}
		return
	case api.OneOf:
		var alt []string
		for _, x := range v {
			alt = append(alt, "`"+reflect.TypeOf(x).Name()+"`")
		}
		fmt.Fprintf(b, "%s: one of %s.\n\n", label, strings.Join(alt, ", "))
		for _, x := range v {
			c.writeType(b, "`"+reflect.TypeOf(x).Name()+"`", x)
		}
		return
	}
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Struct || t.PkgPath() != apiPkg {
		// An engine type: the generated files spell it out.
		fmt.Fprintf(b, "%s: %s", label, jsonType(t))
		if s := structOf(elem(t)); s != nil && c.comment(s) != "" {
			fmt.Fprintf(b, " — %s", c.comment(s))
		}
		fmt.Fprintf(b, " (its fields: `%s` in vscode-ext/src/api.ts and jupyter/vramscope/_api.py).\n\n", c.name(structOf(elem(t))))
		return
	}
	fmt.Fprintf(b, "%s: `%s`", label, t.Name())
	if cm := c.comment(t); cm != "" {
		fmt.Fprintf(b, " — %s", cm)
	}
	b.WriteString("\n\n")
	rows := c.fields(t)
	if len(rows) == 0 {
		b.WriteString("(an empty object)\n\n")
		return
	}
	b.WriteString("| field | type | meaning |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", r.Name, jsonType(r.Type), cell(r.Comment))
	}
	b.WriteString("\n")
}

// elem is what a slice or pointer type holds, through every level.
func elem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t
}

func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		return jsonType(t.Elem()) + "[]"
	case reflect.Pointer:
		return jsonType(t.Elem()) + " or null"
	case reflect.Interface:
		return "any"
	case reflect.Map:
		return "object of " + jsonType(t.Elem())
	case reflect.Struct:
		if t == timeType {
			return "string (RFC 3339)"
		}
		if t.PkgPath() != apiPkg {
			return "`" + t.String() + "`"
		}
		return "`" + t.Name() + "`"
	}
	return t.String()
}

// kib writes a byte count the way the limits are chosen: in KiB or MiB.
func kib(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// cell escapes a comment for a Markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", "\\|")
}
