package lsp

import (
	"reflect"
	"testing"

	"github.com/vramscope/vramscope/daemon/api"
	"github.com/vramscope/vramscope/lsp/command"
)

// TestEveryCommandHasATypedHandler checks the dispatch against the table
// the extension's types are generated from: every command has a handler,
// every handler a command, and each handler decodes the table's argument
// type and answers its result type (an interface where the result is one of
// several), so a changed field in lsp/command changes what the server reads.
func TestEveryCommandHasATypedHandler(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range command.Commands {
		seen[c.Name] = true
		h, ok := commandHandlers[c.Name]
		if !ok {
			t.Errorf("%s is in lsp/command but has no handler", c.Name)
			continue
		}
		if want := reflect.TypeOf(c.Args); h.args != want {
			t.Errorf("%s: the handler reads a %v, the table says %v", c.Name, h.args, want)
		}
		want := reflect.TypeOf(c.Result)
		if _, oneOf := c.Result.(api.OneOf); oneOf {
			want = reflect.TypeFor[any]()
		}
		if h.result != want && h.result != reflect.PointerTo(want) {
			t.Errorf("%s: the handler answers a %v, the table says %v", c.Name, h.result, want)
		}
		if c.Example == "" || c.Doc == "" {
			t.Errorf("%s: no example or doc", c.Name)
		}
	}
	for name := range commandHandlers {
		if !seen[name] {
			t.Errorf("the handler of %s is not in lsp/command's table", name)
		}
	}
	for _, r := range command.Requests {
		types, ok := requestTypes[r.Name]
		if methods[r.Name] == nil || !ok {
			t.Errorf("the request %s is in lsp/command but not registered with registerRequest", r.Name)
			continue
		}
		if types[0] != reflect.TypeOf(r.Args) || types[1] != reflect.TypeOf(r.Result) {
			t.Errorf("%s: the handler reads %v and answers %v, the table says %T and %T", r.Name, types[0], types[1], r.Args, r.Result)
		}
	}
}
