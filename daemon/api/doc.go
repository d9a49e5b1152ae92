package api

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
)

// Markdown renders the contract as docs/api.md. src is this package's api.go,
// parsed for the comments on types and fields (reflection cannot see them).
func Markdown(src []byte) (string, error) {
	comments, err := fieldComments(src)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# vramscope daemon API\n\n")
	b.WriteString("Generated from `daemon/api/api.go` by `go test ./daemon/api -update`; a test fails when this file and the Go source disagree. ")
	fmt.Fprintf(&b, "API version **%s**.\n\n", Version)
	b.WriteString(strings.TrimSpace(`
JSON-RPC 2.0, one message per line (UTF-8 JSON and "\n"). The daemon listens on a Unix socket,
$VRAMSCOPE_SOCKET or $XDG_RUNTIME_DIR/vramscope/daemon.sock (else ~/.cache/vramscope/daemon.sock),
mode 0600 in a 0700 directory, and refuses connections from other users (SO_PEERCRED). With
--tcp 127.0.0.1:PORT it also listens on loopback; a TCP connection must call daemon.hello with the
token from the token file beside the socket before anything else. Agents (the Python package in
jupyter/) use the same socket: they call agent.register and then answer agent.dump.`))
	fmt.Fprintf(&b, "\n\nA message may be at most %s on TCP until daemon.hello has proved the token, else %s\n"+
		"(%s for agent.register, which carries argv), newlines inside it included; a longer one is\n"+
		"answered with -32009. A message that is not JSON is answered with -32700 and its connection\n"+
		"closed; JSON that is not a request or response (a batch, a method that is not a string) with -32600.\n"+
		"docs/security.md says what else bounds a connection (time to say hello, connections per peer).",
		kib(MaxHelloBytes), kib(MaxMessageBytes), kib(MaxRegisterBytes))
	b.WriteString("\n\n## Errors\n\n| code | meaning |\n|---|---|\n")
	for _, e := range errorCodes(src) {
		fmt.Fprintf(&b, "| %s | %s |\n", e[0], e[1])
	}
	b.WriteString("\n## Methods\n\n| method | direction | summary |\n|---|---|---|\n")
	for _, m := range Methods {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s |\n", m.Name, strings.ReplaceAll(m.Name, ".", ""), m.Dir, m.Doc)
	}
	for _, m := range Methods {
		fmt.Fprintf(&b, "\n### %s\n\n%s — %s\n\n", m.Name, m.Dir, m.Doc)
		writeType(&b, "Params", m.Params, comments)
		writeType(&b, "Result", m.Result, comments)
	}
	return b.String(), nil
}

func writeType(b *strings.Builder, label string, v any, comments map[string]string) {
	switch v := v.(type) {
	case nil:
		if label == "Params" {
			fmt.Fprintf(b, "%s: none.\n\n", label)
		}
		return
	case string:
		fmt.Fprintf(b, "%s: %s.\n\n", label, v)
		return
	}
	t := reflect.TypeOf(v)
	fmt.Fprintf(b, "%s: `%s`", label, t.Name())
	if c := comments[t.Name()]; c != "" {
		fmt.Fprintf(b, " — %s", c)
	}
	b.WriteString("\n\n")
	rows := fields(t, comments)
	if len(rows) == 0 {
		b.WriteString("(an empty object)\n\n")
		return
	}
	b.WriteString("| field | type | meaning |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", r[0], r[1], r[2])
	}
	b.WriteString("\n")
}

// fields lists a struct's JSON fields, flattening embedded structs.
func fields(t reflect.Type, comments map[string]string) [][3]string {
	var rows [][3]string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			rows = append(rows, fields(f.Type, comments)...)
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		rows = append(rows, [3]string{name, jsonType(f.Type), comments[t.Name()+"."+f.Name]})
	}
	return rows
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
	case reflect.Struct:
		if t.Name() == "Time" {
			return "string (RFC 3339)"
		}
		return "`" + t.Name() + "`"
	}
	return t.String()
}

// fieldComments maps "Type" and "Type.Field" to their doc or line comments.
func fieldComments(src []byte) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "api.go", src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range g.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok {
				continue
			}
			if g.Doc != nil {
				out[ts.Name.Name] = oneLine(g.Doc.Text())
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, fld := range st.Fields.List {
				c := fld.Comment
				if c == nil {
					c = fld.Doc
				}
				for _, n := range fld.Names {
					if c != nil {
						out[ts.Name.Name+"."+n.Name] = oneLine(c.Text())
					}
				}
			}
		}
	}
	return out, nil
}

// errorCodes lists the Code* constants with their comments.
func errorCodes(src []byte) [][2]string {
	f, err := parser.ParseFile(token.NewFileSet(), "api.go", src, parser.ParseComments)
	if err != nil {
		return nil
	}
	var out [][2]string
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if len(vs.Names) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Code") || len(vs.Values) != 1 {
				continue
			}
			val := fmt.Sprint(exprString(vs.Values[0]))
			c := ""
			if vs.Comment != nil {
				c = oneLine(vs.Comment.Text())
			}
			out = append(out, [2]string{val, c})
		}
	}
	return out
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Value
	case *ast.UnaryExpr:
		return e.Op.String() + exprString(e.X)
	}
	return "?"
}

// kib writes a byte count the way the limits are chosen: in KiB or MiB.
func kib(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", "\\|")
}
