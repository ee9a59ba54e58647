package keeper

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// configChanges names the top-level fields of a stream's configuration
// whose JSON differs between then (the point's) and now (the live one),
// sorted. A field one side lacks counts as its zero value (a later server
// writes fields an earlier one left out), and the server's own metadata
// keys (_nats.*) are left out of the comparison. Whether a stream update
// can set the live configuration back is the restore's question
// (configBack, restore_prefix.go), not the diff's.
func configChanges(then, now json.RawMessage) (changed []string, err error) {
	t, err := configFieldsOf(then)
	if err != nil {
		return nil, fmt.Errorf("the point's stream configuration: %w", err)
	}
	n, err := configFieldsOf(now)
	if err != nil {
		return nil, fmt.Errorf("the live stream configuration: %w", err)
	}
	for key := range t {
		if !sameJSON(key, t[key], n[key]) {
			changed = append(changed, key)
		}
	}
	for key := range n {
		if _, ok := t[key]; !ok && !sameJSON(key, nil, n[key]) {
			changed = append(changed, key)
		}
	}
	slices.Sort(changed)
	return changed, nil
}

// configFieldsOf is a configuration's top-level fields, canonical JSON
// each (object keys sorted, numbers as written), the metadata without the
// server's own keys.
func configFieldsOf(raw json.RawMessage) (map[string]json.RawMessage, error) {
	var fields map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&fields); err != nil {
		return nil, err
	}
	if md, ok := fields["metadata"].(map[string]any); ok {
		for k := range md {
			if strings.HasPrefix(k, "_nats.") {
				delete(md, k)
			}
		}
	}
	out := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	return out, nil
}

// sameJSON reports whether two canonical values of the field key are the
// same, a missing one (nil) being the same as a zero value or the server's
// default for the field.
func sameJSON(key string, a, b json.RawMessage) bool {
	return bytes.Equal(zeroAsNil(key, a), zeroAsNil(key, b))
}

// configDefaults are the values the server gives a field left out (0 and
// -1 both mean no limit).
var configDefaults = map[string][]string{
	"compression": {`"none"`}, "discard": {`"old"`}, "retention": {`"limits"`}, "storage": {`"file"`},
	"max_msgs": {"-1"}, "max_bytes": {"-1"}, "max_consumers": {"-1"}, "max_msgs_per_subject": {"-1"}, "max_msg_size": {"-1"},
}

func zeroAsNil(key string, v json.RawMessage) json.RawMessage {
	switch string(v) {
	case "", "null", "false", "0", `""`, "[]", "{}":
		return nil
	}
	if slices.Contains(configDefaults[key], string(v)) {
		return nil
	}
	return v
}
