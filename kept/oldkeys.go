package kept

import (
	"encoding/json"
	"reflect"
)

// MarshalOldKeys is json.Marshal of v with the old key only where a field
// was renamed (OldKeysOnly): the bytes the release before wrote. What a
// keeper of the release before reads strictly (evidence.json, which its
// DecodeEvidence reads with DisallowUnknownFields) is written so, or it
// refuses the new keys; this release reads either key.
func MarshalOldKeys(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return OldKeysOnly(data, reflect.TypeOf(v)), nil
}

var marshalerType = reflect.TypeFor[json.Marshaler]()

// OldKeysOnly is data, the compact JSON json.Marshal wrote of a value of
// type t, without the member of each renamed key that its old key follows
// (MarshalWire writes both, the new first), at any depth the type says.
// What is not of t's shape is left as it is.
func OldKeysOnly(data []byte, t reflect.Type) []byte {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || (len(renamedOf(t)) == 0 && (t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType))) {
		return data // written by a method of its own: time.Time, json.RawMessage, Duration
	}
	switch t.Kind() {
	case reflect.Struct:
		return oldKeysOfObject(data, t)
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil || items == nil {
			return data
		}
		out := []byte{'['}
		for i, it := range items {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, OldKeysOnly(it, t.Elem())...)
		}
		return append(out, ']')
	}
	return data
}

// oldKeysOfObject is OldKeysOnly of an object of the struct type t.
func oldKeysOfObject(data []byte, t reflect.Type) []byte {
	members, ok := topMembers(data)
	if !ok {
		return data
	}
	fields := fieldsOf(t)
	out := []byte{'{'}
	for n, m := range members {
		var f *wireField
		for i := range fields {
			if m.is(data, fields[i].key) {
				f = &fields[i]
				break
			}
		}
		if f != nil && f.old != "" && n+1 < len(members) && members[n+1].is(data, f.old) {
			continue // the old key follows with the same value
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, data[m.keyStart:m.keyEnd]...)
		out = append(out, ':')
		val := data[m.valStart:m.valEnd]
		if f != nil {
			val = OldKeysOnly(val, f.typ)
		}
		out = append(out, val...)
	}
	return append(out, '}')
}
