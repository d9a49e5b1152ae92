package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// decode reads params into v, answering InvalidParams in plain words on bad
// JSON: the field, what it must be and what it was, rather than Go's
// "cannot unmarshal number -1 into Go struct field X.y of type uint".
func decode(params json.RawMessage, v any) error {
	if len(params) == 0 || string(params) == "null" {
		return nil
	}
	if err := json.Unmarshal(params, v); err != nil {
		return fail(errInvalid, "invalid params: %s", plainJSONError(err))
	}
	return nil
}

func plainJSONError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		got, isNumber := strings.CutPrefix(te.Value, "number ")
		if !isNumber {
			got = article(te.Value)
		}
		if te.Field == "" {
			return fmt.Sprintf("params must be %s, not %s", kindName(te.Type), got)
		}
		return fmt.Sprintf("%q must be %s, not %s", te.Field, kindName(te.Type), got)
	}
	return err.Error()
}

// kindName says in words what JSON a Go type takes.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Pointer:
		return kindName(t.Elem())
	}
	return "an object"
}

// article puts "a" or "an" before the name of a JSON kind ("string", "array").
func article(kind string) string {
	switch kind {
	case "array":
		return "a list"
	case "object":
		return "an object"
	case "bool":
		return "true or false"
	}
	return "a " + kind
}
