// Package wiregen generates, from daemon/api and lsp/command, everything else
// that speaks or describes the wire: the Python agent's constants and
// TypedDicts (jupyter/vramscope/_api.py), the VS Code extension's constants and
// interfaces (vscode-ext/src/api.ts, and vscode-ext/src/commands_gen.ts for the
// language server's commands) and docs/api.md. Every struct a payload carries
// is spelled out from its JSON tags, the engine's (analyze.Site, flame.Node, …)
// too: omitempty members are optional. The Go types stay the one source of
// truth, as gopls generates its protocol from one description. `make generate`
// (go generate ./daemon/api) rewrites the files; a test here fails when one is
// stale.
package wiregen

import (
	"encoding/json"
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
	"github.com/vramscope/vramscope/lsp/command"
	"github.com/vramscope/vramscope/profiler/analyze"
)

// SourceDir is the contract's package, relative to the repository root: its
// Go files (tests aside) are parsed for comments and constant names.
const SourceDir = "daemon/api"

// The generated files, relative to the repository root.
const (
	PythonPath     = "jupyter/vramscope/_api.py"
	TypeScriptPath = "vscode-ext/src/api.ts"
	CommandsPath   = "vscode-ext/src/commands_gen.ts" // the language server's commands (lsp/command)
	MarkdownPath   = "docs/api.md"
)

// File is one generated file.
type File struct {
	Path string // relative to the repository root
	Data []byte
}

// Generate renders every generated file from the contract source under root.
func Generate(root string) ([]File, error) {
	srcs, err := readSources(root, SourceDir)
	if err != nil {
		return nil, err
	}
	c, err := parseContract(srcs)
	if err != nil {
		return nil, err
	}
	if err := c.readComments(root); err != nil {
		return nil, err
	}
	py, err := c.python()
	if err != nil {
		return nil, err
	}
	return []File{
		{PythonPath, []byte(py)},
		{TypeScriptPath, []byte(c.typeScript())},
		{CommandsPath, []byte(c.commandsTS())},
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
	comments map[string]string // "pkg/path.Type" and "pkg/path.Type.Field"
	methods  []constDecl       // method names, in Methods' order
	codes    []constDecl       // Code*: error codes
	limits   []constDecl       // Max*: message size and batch limits
	types    []reflect.Type    // the structs reachable from Methods (engine types too), nested first
	lspTypes []reflect.Type    // the structs the language server's commands carry that types lacks
	names    map[reflect.Type]string
}

var apiPkg = reflect.TypeOf(api.Method{}).PkgPath()

// source is one Go file of the contract.
type source struct {
	Name string
	Data []byte
}

// readSources reads the Go files of dir (relative to root) but its tests,
// sorted by name.
func readSources(root, dir string) ([]source, error) {
	names, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
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
		out = append(out, source{filepath.ToSlash(filepath.Join(dir, filepath.Base(n))), b})
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
				c.typeComments(apiPkg, g)
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
	var err error
	if c.types, c.lspTypes, err = wireTypes(); err != nil {
		return nil, err
	}
	if c.names, err = typeNames(append(append([]reflect.Type(nil), c.types...), c.lspTypes...)); err != nil {
		return nil, err
	}
	return c, nil
}

// readComments reads the comments of the packages other than daemon/api
// whose types the contract carries (the engine's: profiler/analyze,
// profiler/flame, …), from their Go files under root.
func (c *contract) readComments(root string) error {
	module, err := modulePath(root)
	if err != nil {
		return err
	}
	seen := map[string]bool{apiPkg: true}
	for _, t := range append(append([]reflect.Type(nil), c.types...), c.lspTypes...) {
		pkg := t.PkgPath()
		if seen[pkg] {
			continue
		}
		seen[pkg] = true
		dir, ok := strings.CutPrefix(pkg, module+"/")
		if !ok {
			return fmt.Errorf("%s: a wire type from outside the module (%s)", t, module)
		}
		srcs, err := readSources(root, dir)
		if err != nil {
			return err
		}
		for _, src := range srcs {
			f, err := parser.ParseFile(token.NewFileSet(), src.Name, src.Data, parser.ParseComments)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.TYPE {
					c.typeComments(pkg, g)
				}
			}
		}
	}
	return nil
}

// modulePath reads the module's path from root's go.mod.
func modulePath(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", filepath.Join(root, "go.mod"))
}

// typeNames names each wire type in the generated files: its Go name, or,
// where two packages use the same name, the package's name before it
// (analyze.KVCache: AnalyzeKVCache) for every one but daemon/api's.
func typeNames(types []reflect.Type) (map[reflect.Type]string, error) {
	byName := map[string][]reflect.Type{}
	for _, t := range types {
		if strings.ContainsAny(t.Name(), "[]") {
			return nil, fmt.Errorf("%s: a generic type cannot name a wire type", t)
		}
		byName[t.Name()] = append(byName[t.Name()], t)
	}
	names := map[reflect.Type]string{}
	taken := map[string]bool{}
	for _, t := range types {
		n := t.Name()
		if len(byName[n]) > 1 && t.PkgPath() != apiPkg {
			pkg := t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:]
			n = strings.ToUpper(pkg[:1]) + pkg[1:] + n
		}
		if taken[n] {
			return nil, fmt.Errorf("%s: two wire types would be named %s", t, n)
		}
		taken[n] = true
		names[t] = n
	}
	return names, nil
}

// typeComments records the doc comment of each type and the comment of each
// struct field (its line comment, else its doc comment).
func (c *contract) typeComments(pkg string, g *ast.GenDecl) {
	for _, spec := range g.Specs {
		ts := spec.(*ast.TypeSpec)
		key := pkg + "." + ts.Name.Name
		doc := g.Doc
		if ts.Doc != nil {
			doc = ts.Doc
		}
		if doc != nil {
			c.comments[key] = oneLine(doc.Text())
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
					c.comments[key+"."+n.Name] = oneLine(cm.Text())
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

// wireTypes lists the structs the daemon's methods carry, each once, in the
// order a depth-first walk of Methods meets them (nested types first): those
// of daemon/api and the engine's they hold (analyze.Site, flame.Node, …).
// lspTypes are the ones only the language server's commands carry.
func wireTypes() (types, lspTypes []reflect.Type, err error) {
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, out *[]reflect.Type)
	walk = func(t reflect.Type, out *[]reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == timeType || seen[t] {
			return
		}
		seen[t] = true
		if err == nil && reflect.PointerTo(t).Implements(marshalerType) && !sameShape[t] {
			err = fmt.Errorf("%s writes its own JSON (MarshalJSON): declare its wire form as a struct and carry that", t)
		}
		for i := 0; i < t.NumField(); i++ {
			if f := t.Field(i); onWire(f) {
				walk(f.Type, out)
			}
		}
		*out = append(*out, t)
	}
	for _, m := range api.Methods {
		for _, v := range append([]any{m.Params}, resultTypes(m.Result)...) {
			if v != nil {
				walk(reflect.TypeOf(v), &types)
			}
		}
	}
	for _, v := range cliOnly {
		walk(reflect.TypeOf(v), &types)
	}
	for _, cmd := range append(append([]command.Command(nil), command.Commands...), command.Requests...) {
		for _, v := range append([]any{cmd.Args}, resultTypes(cmd.Result)...) {
			if v != nil {
				walk(reflect.TypeOf(v), &lspTypes)
			}
		}
	}
	return types, lspTypes, err
}

// cliOnly are what the engine's CLI writes that no daemon method carries
// (diff --report), for the notebook, which reads the CLI's JSON.
var cliOnly = []any{analyze.CompareReport{}}

// onWire says whether encoding/json writes f: exported (or an embedded
// struct) and not tagged "-".
func onWire(f reflect.StructField) bool {
	if f.Tag.Get("json") == "-" {
		return false
	}
	return f.IsExported() || f.Anonymous && structOf(f.Type) != nil
}

// resultTypes are the types a result may have: one, or those of a command.OneOf.
func resultTypes(v any) []any {
	if alt, ok := v.(api.OneOf); ok {
		return alt
	}
	return []any{v}
}

var (
	marshalerType = reflect.TypeOf((*json.Marshaler)(nil)).Elem()
	rawType       = reflect.TypeOf(json.RawMessage(nil))
	// sameShape are the types whose MarshalJSON writes their own fields
	// (analyze.Result bounds its site lists): their fields are their JSON.
	sameShape = map[reflect.Type]bool{reflect.TypeOf(analyze.Result{}): true}
)

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
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && structOf(f.Type) != nil {
			out = append(out, c.fields(structOf(f.Type))...)
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		opt := strings.Contains(","+opts+",", ",omitempty,") || strings.Contains(","+opts+",", ",omitzero,")
		out = append(out, field{name, f.Type, opt, c.comments[t.PkgPath()+"."+t.Name()+"."+f.Name]})
	}
	return out
}

// structOf is t, or what t points to, when that is a struct.
func structOf(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		return t
	}
	return nil
}

// base is the wire type t embeds whole, untagged (SnapshotResult embeds
// Snapshot), or nil. The Python and TypeScript files extend it instead of
// repeating its fields; docs/api.md lists every field in one table.
func base(t reflect.Type) reflect.Type {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" && f.Type.Kind() == reflect.Struct && f.Type != timeType {
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

// comment is the doc comment of a wire type.
func (c *contract) comment(t reflect.Type) string {
	return c.comments[t.PkgPath()+"."+t.Name()]
}

// name is what the generated files call a wire type.
func (c *contract) name(t reflect.Type) string {
	if n, ok := c.names[t]; ok {
		return n
	}
	return t.Name()
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
