// Package wiregen generates, from daemon/api, everything else that speaks or
// describes the daemon's wire: the Python agent's constants and TypedDicts
// (jupyter/vramscope/_api.py), the VS Code extension's constants and
// interfaces (vscode-ext/src/api.ts) and docs/api.md. daemon/api stays the one
// source of truth, as gopls generates its protocol from one description.
// `make generate` (go generate ./daemon/api) rewrites the files; a test here
// fails when one is stale.
package wiregen

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/vramscope/vramscope/daemon/api"
)

// SourceDir is the contract's package, relative to the repository root: its
// Go files (tests aside) are parsed for comments and constant names.
const SourceDir = "daemon/api"

// The generated files, relative to the repository root.
const (
	PythonPath     = "jupyter/vramscope/_api.py"
	TypeScriptPath = "vscode-ext/src/api.ts"
	MarkdownPath   = "docs/api.md"
)

// File is one generated file.
type File struct {
	Path string // relative to the repository root
	Data []byte
}

// Generate renders every generated file from the contract source under root.
func Generate(root string) ([]File, error) {
	srcs, err := readSources(filepath.Join(root, SourceDir))
	if err != nil {
		return nil, err
	}
	c, err := parseContract(srcs)
	if err != nil {
		return nil, err
	}
	py, err := c.python()
	if err != nil {
		return nil, err
	}
	return []File{
		{PythonPath, []byte(py)},
		{TypeScriptPath, []byte(c.typeScript())},
		{MarkdownPath, []byte(c.markdown())},
	}, nil
}

// constDecl is one named constant of the contract.
type constDecl struct {
	Name    string // the Go name
	Value   constant.Value
	Comment string
}

// contract is what the generators need: the Go comments (reflection cannot
// see them), the named constants, and the wire types in order of appearance.
type contract struct {
	comments map[string]string // "Type" and "Type.Field"
	methods  []constDecl       // method names, in Methods' order
	codes    []constDecl       // Code*: error codes
	limits   []constDecl       // Max*: message size and batch limits
	types    []reflect.Type    // daemon/api structs reachable from Methods
}

var apiPkg = reflect.TypeOf(api.Method{}).PkgPath()

// source is one Go file of the contract.
type source struct {
	Name string
	Data []byte
}

// readSources reads dir's Go files but its tests, sorted by name.
func readSources(dir string) ([]source, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []source
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		out = append(out, source{filepath.ToSlash(filepath.Join(SourceDir, filepath.Base(n))), b})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no Go files", dir)
	}
	return out, nil
}

func parseContract(srcs []source) (*contract, error) {
	c := &contract{comments: map[string]string{}}
	consts := map[string]constDecl{}
	var order []string
	for _, src := range srcs {
		f, err := parser.ParseFile(token.NewFileSet(), src.Name, src.Data, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch g.Tok {
			case token.TYPE:
				c.typeComments(g)
			case token.CONST:
				for _, d := range constDecls(g) {
					consts[d.Name] = d
					order = append(order, d.Name)
				}
			}
		}
	}
	byValue := map[string]constDecl{}
	for _, name := range order {
		d := consts[name]
		switch {
		case strings.HasPrefix(name, "Code") && d.Value.Kind() == constant.Int:
			c.codes = append(c.codes, d)
		case strings.HasPrefix(name, "Max") && d.Value.Kind() == constant.Int:
			c.limits = append(c.limits, d)
		case d.Value.Kind() == constant.String:
			byValue[constant.StringVal(d.Value)] = d
		}
	}
	for _, m := range api.Methods {
		d, ok := byValue[m.Name]
		if !ok {
			return nil, fmt.Errorf("%s: method %q has no named constant", SourceDir, m.Name)
		}
		d.Comment = m.Doc
		c.methods = append(c.methods, d)
	}
	c.types = wireTypes()
	return c, nil
}

// typeComments records the doc comment of each type and the comment of each
// struct field (its line comment, else its doc comment).
func (c *contract) typeComments(g *ast.GenDecl) {
	for _, spec := range g.Specs {
		ts := spec.(*ast.TypeSpec)
		if g.Doc != nil {
			c.comments[ts.Name.Name] = oneLine(g.Doc.Text())
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			continue
		}
		for _, fld := range st.Fields.List {
			cm := fld.Comment
			if cm == nil {
				cm = fld.Doc
			}
			for _, n := range fld.Names {
				if cm != nil {
					c.comments[ts.Name.Name+"."+n.Name] = oneLine(cm.Text())
				}
			}
		}
	}
}

// constDecls evaluates a const block's single-name specs with literal values
// (numbers, strings, and arithmetic on them such as 4 << 10).
func constDecls(g *ast.GenDecl) []constDecl {
	var out []constDecl
	for _, spec := range g.Specs {
		vs := spec.(*ast.ValueSpec)
		if len(vs.Names) != 1 || len(vs.Values) != 1 {
			continue
		}
		v := eval(vs.Values[0])
		if v.Kind() == constant.Unknown {
			continue
		}
		d := constDecl{Name: vs.Names[0].Name, Value: v}
		if vs.Comment != nil {
			d.Comment = oneLine(vs.Comment.Text())
		} else if vs.Doc != nil {
			d.Comment = oneLine(vs.Doc.Text())
		}
		out = append(out, d)
	}
	return out
}

func eval(e ast.Expr) constant.Value {
	switch e := e.(type) {
	case *ast.BasicLit:
		return constant.MakeFromLiteral(e.Value, e.Kind, 0)
	case *ast.ParenExpr:
		return eval(e.X)
	case *ast.UnaryExpr:
		x := eval(e.X)
		if x.Kind() == constant.Unknown {
			return x
		}
		return constant.UnaryOp(e.Op, x, 0)
	case *ast.BinaryExpr:
		x, y := eval(e.X), eval(e.Y)
		if x.Kind() == constant.Unknown || y.Kind() == constant.Unknown {
			return constant.MakeUnknown()
		}
		if e.Op == token.SHL || e.Op == token.SHR {
			n, _ := constant.Uint64Val(y)
			return constant.Shift(x, e.Op, uint(n))
		}
		return constant.BinaryOp(x, e.Op, y)
	}
	return constant.MakeUnknown()
}

// wireTypes lists the daemon/api structs the methods carry, each once, in the
// order a depth-first walk of Methods meets them (nested types first).
func wireTypes() []reflect.Type {
	var out []reflect.Type
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != apiPkg || seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			walk(t.Field(i).Type)
		}
		out = append(out, t)
	}
	for _, m := range api.Methods {
		for _, v := range []any{m.Params, m.Result} {
			if v == nil {
				continue
			}
			if _, text := v.(string); !text {
				walk(reflect.TypeOf(v))
			}
		}
	}
	return out
}

// field is one JSON member of a wire struct.
type field struct {
	Name     string // as JSON spells it
	Type     reflect.Type
	Optional bool // omitempty or omitzero: absent when empty
	Comment  string
}

// fields lists a struct's JSON members, flattening embedded structs as
// encoding/json does.
func (c *contract) fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, c.fields(f.Type)...)
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		opt := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		out = append(out, field{name, f.Type, opt, c.comments[t.Name()+"."+f.Name]})
	}
	return out
}

// base is the wire type t embeds whole, untagged (SnapshotResult embeds
// Snapshot), or nil. The Python and TypeScript files extend it instead of
// repeating its fields; docs/api.md lists every field in one table.
func base(t reflect.Type) reflect.Type {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" && f.Type.Kind() == reflect.Struct && f.Type.PkgPath() == apiPkg {
			return f.Type
		}
	}
	return nil
}

// ownFields are t's JSON members less those of its base.
func (c *contract) ownFields(t reflect.Type) []field {
	b := base(t)
	if b == nil {
		return c.fields(t)
	}
	inherited := map[string]bool{}
	for _, f := range c.fields(b) {
		inherited[f.Name] = true
	}
	var out []field
	for _, f := range c.fields(t) {
		if !inherited[f.Name] {
			out = append(out, f)
		}
	}
	return out
}

var timeType = reflect.TypeOf(time.Time{})

// foreign says whether t is a struct from outside daemon/api (an analysis
// result): the generated files name it but do not spell it out.
func foreign(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != timeType && t.PkgPath() != apiPkg
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// snake turns a Go name into UPPER_SNAKE: AgentRegister -> AGENT_REGISTER,
// EventOOMCaptured -> EVENT_OOM_CAPTURED.
func snake(name string) string {
	var b strings.Builder
	r := []rune(name)
	for i, ch := range r {
		upper := ch >= 'A' && ch <= 'Z'
		if i > 0 && upper {
			prev := r[i-1]
			prevLower := prev >= 'a' && prev <= 'z' || prev >= '0' && prev <= '9'
			nextLower := i+1 < len(r) && r[i+1] >= 'a' && r[i+1] <= 'z'
			if prevLower || (prev >= 'A' && prev <= 'Z' && nextLower) {
				b.WriteByte('_')
			}
		}
		b.WriteString(strings.ToUpper(string(ch)))
	}
	return b.String()
}
