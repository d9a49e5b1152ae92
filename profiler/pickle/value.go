package pickle

import (
	"fmt"
	"math"
	"math/big"
)

// Kind is the Python type of a Value.
type Kind uint8

// The kinds of plain data a pickle can hold.
const (
	None Kind = iota
	Bool
	Int
	BigInt
	Float
	Str
	Bytes
	Tuple
	ListKind
	DictKind
	SetKind
	kindMark // internal: a MARK on the stack
)

// Value is one decoded object. Small values live inline so the hot path does not
// allocate: Num holds an int, a bool (0/1) or a float's bits; Text holds str and
// bytes; Ref holds *big.Int, []Value (tuples), *List, *Dict or *Set.
type Value struct {
	Kind Kind
	Num  int64
	Text string
	Ref  any
}

// List is a Python list. Tag is free for the caller (decoders cache results there).
type List struct {
	Items []Value
	Tag   any
	Mark  int64 // free for the caller, like Tag, without an allocation
	// Count is the number of items appended, including any a caller consumed
	// through Machine.OnAppend instead of keeping.
	Count int64
	// shared: the flat path hands out this one list for many equal ones
	// (flat.go), memo slots included; a memo read outside the flat path
	// copies it first, so that nothing appends to it.
	shared bool
}

// Dict is a Python dict, kept as alternating keys and values in insertion order
// (later duplicates win on lookup, as in Python).
type Dict struct {
	Items []Value
	Tag   any
	Mark  int64 // free for the caller, like Tag, without an allocation
	// kept: a memo slot that is read back (or DUP) gave this dict a second
	// reference, so Release must never recycle it, even once the slot is
	// dropped: the reader may still hold it (the same entry twice in a trace).
	kept bool
}

// Set is a Python set or frozenset (Frozen; only a frozenset can be a dict key).
type Set struct {
	Items  []Value
	Frozen bool
}

// Get returns the value stored under a string key.
func (d *Dict) Get(key string) (Value, bool) {
	for i := len(d.Items) - 2; i >= 0; i -= 2 {
		if k := d.Items[i]; k.Kind == Str && k.Text == key {
			return d.Items[i+1], true
		}
	}
	return Value{}, false
}

// Len is the number of key/value pairs.
func (d *Dict) Len() int { return len(d.Items) / 2 }

// AsInt returns an integer value (bools count, as in Python); big ints that fit
// in int64 are accepted too.
func (v Value) AsInt() (int64, bool) {
	switch v.Kind {
	case Int, Bool:
		return v.Num, true
	case BigInt:
		b := v.Ref.(*big.Int)
		if b.IsInt64() {
			return b.Int64(), true
		}
	}
	return 0, false
}

// AsUint returns a non-negative integer up to 2^64-1.
func (v Value) AsUint() (uint64, bool) {
	switch v.Kind {
	case Int, Bool:
		if v.Num >= 0 {
			return uint64(v.Num), true
		}
	case BigInt:
		b := v.Ref.(*big.Int)
		if b.Sign() >= 0 && b.IsUint64() {
			return b.Uint64(), true
		}
	}
	return 0, false
}

// AsFloat returns a float, converting ints.
func (v Value) AsFloat() (float64, bool) {
	switch v.Kind {
	case Float:
		return math.Float64frombits(uint64(v.Num)), true
	case Int, Bool:
		return float64(v.Num), true
	}
	return 0, false
}

// AsBool returns a bool (ints count: non-zero is true).
func (v Value) AsBool() (bool, bool) {
	switch v.Kind {
	case Bool, Int:
		return v.Num != 0, true
	}
	return false, false
}

// AsString returns a str (or bytes) value.
func (v Value) AsString() (string, bool) {
	if v.Kind == Str || v.Kind == Bytes {
		return v.Text, true
	}
	return "", false
}

// Items returns the elements of a list, tuple or set.
func (v Value) Items() ([]Value, bool) {
	switch v.Kind {
	case Tuple:
		return v.Ref.([]Value), true
	case ListKind:
		return v.Ref.(*List).Items, true
	case SetKind:
		return v.Ref.(*Set).Items, true
	}
	return nil, false
}

// TypeName is the Python type name, for error messages.
func (v Value) TypeName() string {
	switch v.Kind {
	case None:
		return "None"
	case Bool:
		return "bool"
	case Int, BigInt:
		return "int"
	case Float:
		return "float"
	case Str:
		return "str"
	case Bytes:
		return "bytes"
	case Tuple:
		return "tuple"
	case ListKind:
		return "list"
	case DictKind:
		return "dict"
	case SetKind:
		return "set"
	}
	return fmt.Sprintf("kind(%d)", v.Kind)
}

// Plain converts a value to Go's plain types, as encoding/json would see
// Python's json.dumps of it: nil, bool, int64, *big.Int, float64, string,
// []byte, []any (lists, tuples, sets), map[string]any (string keys; other keys
// are formatted). It is for tests and small values, not for whole snapshots.
func (v Value) Plain() any {
	switch v.Kind {
	case None:
		return nil
	case Bool:
		return v.Num != 0
	case Int:
		return v.Num
	case BigInt:
		return v.Ref
	case Float:
		return math.Float64frombits(uint64(v.Num))
	case Str:
		return v.Text
	case Bytes:
		return []byte(v.Text)
	case DictKind:
		d := v.Ref.(*Dict)
		m := make(map[string]any, d.Len())
		for i := 0; i+1 < len(d.Items); i += 2 {
			k := d.Items[i]
			ks, ok := k.AsString()
			if !ok {
				ks = fmt.Sprint(k.Plain())
			}
			m[ks] = d.Items[i+1].Plain()
		}
		return m
	}
	items, _ := v.Items()
	out := make([]any, len(items))
	for i, it := range items {
		out[i] = it.Plain()
	}
	return out
}
