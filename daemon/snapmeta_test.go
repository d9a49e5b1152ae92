package daemon

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/vramscope/vramscope/daemon/store"
)

// TestWireSnapshotCarriesEveryField fills every field of a store.Meta with a
// value that is not zero and checks the wire's JSON says the same as the
// disk's: a field the conversion forgets shows as missing or zero.
func TestWireSnapshotCarriesEveryField(t *testing.T) {
	var m store.Meta
	fill(reflect.ValueOf(&m).Elem())
	disk, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	wire, err := json.Marshal(wireSnapshot(m))
	if err != nil {
		t.Fatal(err)
	}
	var a, b map[string]any
	if err := json.Unmarshal(disk, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(wire, &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("the wire's snapshot differs from the store's record:\n disk: %s\n wire: %s", disk, wire)
	}
}

// fill sets every field of v to a value that is not zero (time: a fixed date).
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 20, 0, 0, 5, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			fill(v.Field(i))
		}
	case reflect.String:
		v.SetString(v.Type().String() + "-x")
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint64:
		v.SetUint(9)
	case reflect.Float64:
		v.SetFloat(1.5)
	}
}
