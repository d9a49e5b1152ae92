package lsp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// argShapes says, for each command, what its one argument looks like: an
// error about the arguments quotes it.
var argShapes = map[string]string{
	cmdOpenSnapshot:     `{"path": "snapshot.pickle"}`,
	cmdCompareSnapshots: `{"a": "before.pickle", "b": "after.pickle"}`,
	cmdTakeSnapshot:     `{"pid": 1234, "label": "text"} (both optional)`,
	cmdAttach:           `{"pid": 1234}`,
	cmdListProcesses:    `{} or nothing`,
	cmdListSnapshots:    `{} or nothing`,
	cmdFlameGraph:       `{"file": "train.py", "function": "train_step", "weight": "peak"|"alloc", "format": "html"|"tree"} (all optional)`,
	cmdStatus:           `{"pid": 1234} (optional)`,
	cmdTakeJobSnapshot:  `{"pid": 1234, "label": "text"}`,
	cmdRanks:            `{"group": "GROUP-ID"}`,
	cmdShowFitPlans:     `{"file": "train.py", "line": 23}`,
}

// decodeArgs reads a command's arguments leniently: none, null, and an empty
// array (Lua's {} encodes as []) are no argument; anything else must be one
// object, and the error says which argument and what shape it should have.
func decodeArgs(command string, args []json.RawMessage) (commandArgs, error) {
	var a commandArgs
	if len(args) == 0 {
		return a, nil
	}
	if len(args) > 1 {
		return a, invalid(fmt.Sprintf("%s takes one argument, %s; got %d", command, argShapes[command], len(args)))
	}
	raw := bytes.TrimSpace(args[0])
	if string(raw) == "null" || string(raw) == "[]" || len(raw) == 0 {
		return a, nil
	}
	if raw[0] != '{' {
		return a, invalid(fmt.Sprintf("%s: argument 1 must be an object, %s; got %s", command, argShapes[command], clip(raw)))
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return a, invalid(fmt.Sprintf("%s: argument 1's %q must be a %s, not a JSON %s (%s)", command, te.Field, jsonKind(te.Type.Kind().String()), te.Value, argShapes[command]))
		}
		return a, invalid(fmt.Sprintf("%s: argument 1 is not %s: %v", command, argShapes[command], err))
	}
	return a, nil
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
