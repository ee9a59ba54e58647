package kept

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// The contract's JSON keys are kebab-case. Keys that were snake_case before
// (total_bytes, archive_size, ack_floor, …) keep their old name in a `was`
// tag beside the new one:
//
//	ArchiveSize int64 `json:"archive-size" was:"archive_size"`
//
// and the type's MarshalJSON and UnmarshalJSON go through MarshalWire and
// UnmarshalWire with a twin of the type that has no methods. For one release
// (see README, "Wire casing") every reply, record, act and progress message
// carries the old key too, right after the new one with the same value; and
// decoding reads the old key as the new one, so the records and acts that
// older keepers wrote, and the replies of older keepers, read the same. When
// both are given the new key wins. The next release stops writing
// the old keys (WriteOldKeys false) and goes on reading them: records stay
// in stores for years.

// WriteOldKeys says whether MarshalWire writes each old key beside its new
// one: true for the one release in which both are written (README, "Wire
// casing").
const WriteOldKeys = true

// wireField is one JSON field of a struct type as encoding/json sees it
// (embedded structs flattened): its key, its old key ("" for none), and
// its type.
type wireField struct {
	key, old string
	typ      reflect.Type
}

var wireFieldCache sync.Map // reflect.Type → []wireField

// fieldsOf are the JSON fields of the struct type t.
func fieldsOf(t reflect.Type) []wireField {
	if f, ok := wireFieldCache.Load(t); ok {
		return f.([]wireField)
	}
	var fs []wireField
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := sf.Type
		if sf.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				fs = append(fs, fieldsOf(ft)...)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fs = append(fs, wireField{key: name, old: sf.Tag.Get("was"), typ: sf.Type})
	}
	wireFieldCache.Store(t, fs)
	return fs
}

// renamedOf are the fields of t (a struct, or a pointer to one) that have an
// old key.
func renamedOf(t reflect.Type) []wireField {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []wireField
	for _, f := range fieldsOf(t) {
		if f.old != "" {
			out = append(out, f)
		}
	}
	return out
}

// MarshalWire is json.Marshal of v, a pointer to a struct without a
// MarshalJSON of its own (the twin of a contract type), with each key that
// has an old name followed by the old key and the same value.
func MarshalWire(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	renamed := renamedOf(reflect.TypeOf(v))
	if len(renamed) == 0 || !WriteOldKeys {
		return data, nil
	}
	var out []byte
	last, left := 0, len(renamed)
	eachMember(data, func(m member) bool {
		for _, f := range renamed {
			if !m.is(data, f.key) {
				continue
			}
			if out == nil {
				out = make([]byte, 0, len(data)+len(renamed)*(len(f.old)+24))
			}
			out = append(out, data[last:m.valEnd]...)
			out = append(out, ',', '"')
			out = append(out, f.old...)
			out = append(out, '"', ':')
			out = append(out, data[m.valStart:m.valEnd]...)
			last = m.valEnd
			left--
		}
		return left > 0 // json.Marshal writes each key once: done when all are found
	})
	if out == nil {
		return data, nil
	}
	return append(out, data[last:]...), nil
}

// UnmarshalWire is json.Unmarshal of data into v, a pointer to a struct
// without an UnmarshalJSON of its own (the twin of a contract type), with
// the old keys of its fields read as their new ones (matched as
// encoding/json matches keys: without regard to case). When an object
// holds both a key and its old name, the new key wins and the old is not
// read.
func UnmarshalWire(data []byte, v any) error {
	if renamed := renamedOf(reflect.TypeOf(v)); len(renamed) > 0 {
		data = newKeys(data, renamed)
	}
	return json.Unmarshal(data, v)
}

// newKeys is the object data with each old key whose new key it does not
// hold renamed to the new one (where it holds both, the decoder passes the
// old one over, as a key it does not know); data itself when there is
// nothing to rename or it is no object (json.Unmarshal then says what is
// wrong with it).
func newKeys(data []byte, renamed []wireField) []byte {
	var has, old uint64 // bit j: renamed[j]'s new key, its old key, is there
	eachMember(data, func(m member) bool {
		key := m.key(data)
		for j, f := range renamed {
			switch {
			case strings.EqualFold(key, f.key):
				has |= 1 << j
			case strings.EqualFold(key, f.old):
				old |= 1 << j
			}
		}
		return true
	})
	if old&^has == 0 {
		return data
	}
	var out []byte
	last := 0
	eachMember(data, func(m member) bool {
		key := m.key(data)
		for j, f := range renamed {
			if has&(1<<j) != 0 || !strings.EqualFold(key, f.old) {
				continue
			}
			out = append(out, data[last:m.keyStart]...)
			out = append(out, '"')
			out = append(out, f.key...)
			out = append(out, '"')
			last = m.keyEnd
		}
		return true
	})
	return append(out, data[last:]...)
}

// CheckWireKeys refuses, as json.Decoder.DisallowUnknownFields does, an
// object in data whose key is none of its type's (t) fields' keys or old
// keys, at any depth. A strict decoder of a contract type calls it, since
// the types' own UnmarshalJSON cannot know the decoder is strict. What is
// not valid JSON, or not of t's shape, it leaves to the decoder to refuse.
func CheckWireKeys(data []byte, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) && len(renamedOf(t)) == 0 {
		return nil // decoded by a method of its own: time.Time, json.RawMessage, Duration
	}
	switch t.Kind() {
	case reflect.Struct:
		return checkObjectKeys(data, t)
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return nil
		}
		for _, it := range items {
			if err := CheckWireKeys(it, t.Elem()); err != nil {
				return err
			}
		}
	case reflect.Map:
		var items map[string]json.RawMessage
		if json.Unmarshal(data, &items) != nil {
			return nil
		}
		for _, it := range items {
			if err := CheckWireKeys(it, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkObjectKeys is CheckWireKeys of an object of the struct type t.
func checkObjectKeys(data []byte, t reflect.Type) error {
	members, ok := topMembers(data)
	if !ok {
		return nil
	}
	fields := fieldsOf(t)
	for _, m := range members {
		key := m.key(data)
		i := slices.IndexFunc(fields, func(f wireField) bool {
			return strings.EqualFold(key, f.key) || (f.old != "" && strings.EqualFold(key, f.old))
		})
		if i < 0 {
			return fmt.Errorf("json: unknown field %q", key)
		}
		if err := CheckWireKeys(data[m.valStart:m.valEnd], fields[i].typ); err != nil {
			return err
		}
	}
	return nil
}

// member is one key and value of a JSON object: the key's bytes with its
// quotes, and the value's.
type member struct {
	keyStart, keyEnd, valStart, valEnd int
}

// is reports whether the member's key is exactly key, as json.Marshal
// writes a tag's key (no escapes).
func (m member) is(data []byte, key string) bool {
	k := data[m.keyStart:m.keyEnd]
	return len(k) == len(key)+2 && string(k[1:len(k)-1]) == key
}

// key is the member's key, unescaped.
func (m member) key(data []byte) string {
	k := data[m.keyStart:m.keyEnd]
	if bytes.IndexByte(k, '\\') < 0 {
		return string(k[1 : len(k)-1])
	}
	var s string
	if json.Unmarshal(k, &s) != nil {
		return ""
	}
	return s
}

// topMembers are the members of the object data begins with (after any
// space), in order; false when data does not begin with a whole object.
func topMembers(data []byte) ([]member, bool) {
	var ms []member
	ok := eachMember(data, func(m member) bool {
		ms = append(ms, m)
		return true
	})
	return ms, ok
}

// eachMember calls fn with each member of the object data begins with
// (after any space), in order, until fn returns false; it reports whether
// data begins with a whole object (or fn stopped). It trusts data to be
// JSON as far as telling strings, objects and arrays apart: json.Unmarshal
// checks the rest.
func eachMember(data []byte, fn func(member) bool) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return true
	}
	for i < len(data) {
		if data[i] != '"' {
			return false
		}
		var m member
		m.keyStart, m.keyEnd = i, skipString(data, i)
		i = skipSpace(data, m.keyEnd)
		if m.keyEnd < 0 || i >= len(data) || data[i] != ':' {
			return false
		}
		m.valStart = skipSpace(data, i+1)
		m.valEnd = skipValue(data, m.valStart)
		if m.valEnd < 0 {
			return false
		}
		if !fn(m) {
			return true
		}
		i = skipSpace(data, m.valEnd)
		if i >= len(data) {
			return false
		}
		if data[i] == '}' {
			return true
		}
		if data[i] != ',' {
			return false
		}
		i = skipSpace(data, i+1)
	}
	return false
}

func skipSpace(data []byte, i int) int {
	for i >= 0 && i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString is the index after the string that begins at i, or -1.
func skipString(data []byte, i int) int {
	for j := i + 1; j < len(data); {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		back := 0
		for back < j-i-1 && data[j-1-back] == '\\' {
			back++
		}
		if back%2 == 0 {
			return j + 1
		}
		j++
	}
	return -1
}

// skipValue is the index after the value that begins at i, or -1.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				if j = skipString(data, j); j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(data) && !strings.ContainsRune(",}] \t\n\r", rune(data[j])) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

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
