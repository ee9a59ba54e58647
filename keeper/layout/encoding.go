package layout

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// IndentBelow is the size of compact JSON under which a record is written
// indented, for people to read; a bigger one (a point of many consumers'
// positions) is written compact, which takes a third less room and a third
// less time to write and read back.
const IndentBelow = 64 << 10

// RecordJSON is how every record object the keeper writes to the store
// (point.json, aside.json, evidence.json, the store's identity) is
// encoded: indented by two spaces when its compact JSON is under
// IndentBelow bytes, else compact; with a final newline.
func RecordJSON(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return ShapeRecord(data)
}

// ShapeRecord is RecordJSON of the compact JSON data.
func ShapeRecord(data []byte) ([]byte, error) {
	if len(data) < IndentBelow {
		var b bytes.Buffer
		b.Grow(2 * len(data))
		if err := json.Indent(&b, data, "", "  "); err != nil {
			return nil, err
		}
		data = b.Bytes()
	}
	return append(data, '\n'), nil
}

// AppendField adds the member name, whose value is the JSON raw, last to
// obj, the compact JSON of an object (what names it in the error), and
// gives the compact JSON of the whole: so a record's big part (a point's
// positions) is encoded beforehand, apart from the rest. It reuses obj's
// bytes.
func AppendField(what string, obj []byte, name string, raw []byte) ([]byte, error) {
	if len(obj) < 2 || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("%s encoded as %.40q", what, obj)
	}
	sep := ","
	if len(obj) == 2 {
		sep = ""
	}
	return append(append(append(obj[:len(obj)-1], sep+`"`+name+`":`...), raw...), '}'), nil
}

// EncodeAhead begins json.Marshal of v in the background; its result is
// given by the returned func, which waits for it.
func EncodeAhead(v any) func() ([]byte, error) {
	type encoded struct {
		data []byte
		err  error
	}
	done := make(chan encoded, 1)
	go func() {
		data, err := json.Marshal(v)
		done <- encoded{data, err}
	}()
	return func() ([]byte, error) {
		e := <-done
		return e.data, e.err
	}
}
