package lsp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/vramscope/vramscope/lsp/command"
)

// argShapes says, for each command, what its one argument looks like (its
// table entry's Example): an error about the arguments quotes it.
var argShapes = func() map[string]string {
	m := map[string]string{}
	for _, c := range command.Commands {
		m[c.Name] = c.Example
	}
	return m
}()

// decodeArgs reads a command's arguments leniently: none, null, and an empty
// array (Lua's {} encodes as []) are no argument; anything else must be one
// object, and the error says which argument and what shape it should have.
func decodeArgs(command string, args []json.RawMessage, a any) error {
	if len(args) == 0 {
		return nil
	}
	if len(args) > 1 {
		return invalid(fmt.Sprintf("%s takes one argument, %s; got %d", command, argShapes[command], len(args)))
	}
	raw := bytes.TrimSpace(args[0])
	if string(raw) == "null" || string(raw) == "[]" || len(raw) == 0 {
		return nil
	}
	if raw[0] != '{' {
		return invalid(fmt.Sprintf("%s: argument 1 must be an object, %s; got %s", command, argShapes[command], clip(raw)))
	}
	if err := json.Unmarshal(raw, a); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return invalid(fmt.Sprintf("%s: argument 1's %q must be a %s, not a JSON %s (%s)", command, te.Field, jsonKind(te.Type.Kind().String()), te.Value, argShapes[command]))
		}
		return invalid(fmt.Sprintf("%s: argument 1 is not %s: %v", command, argShapes[command], err))
	}
	return nil
}

// jsonKind names a Go kind in JSON's words.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	}
	return "number"
}
