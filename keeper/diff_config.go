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
// sorted, and says why a stream update cannot set now back to then ("" when
// it can). A field one side lacks counts as its zero value (a later server
// writes fields an earlier one left out), and the server's own metadata
// keys (_nats.*) are left out of the comparison.
//
// What an update cannot change is nats-server's rule (2.15, stream.go
// configUpdateCheckLocked): the name and the storage type; the retention
// to or from work queue; a sealed stream cannot be unsealed, deny-delete
// and deny-purge cannot be cancelled, message TTLs and schedules cannot be
// turned off, the message counter and the persist mode cannot change, and
// a mirror's configuration cannot change. Subjects, limits, replicas,
// placement, sources and the rest can.
func configChanges(then, now json.RawMessage) (changed []string, fixed string, err error) {
	t, err := configFieldsOf(then)
	if err != nil {
		return nil, "", fmt.Errorf("the point's stream configuration: %w", err)
	}
	n, err := configFieldsOf(now)
	if err != nil {
		return nil, "", fmt.Errorf("the live stream configuration: %w", err)
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
	return changed, fixedChange(t, n), nil
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

// fixedChange says why an update cannot set now back to then, or "".
func fixedChange(then, now map[string]json.RawMessage) string {
	is := func(m map[string]json.RawMessage, key string) bool { return string(m[key]) == "true" }
	differ := func(key string) bool { return !sameJSON(key, then[key], now[key]) }
	switch {
	case differ("name"):
		return "its name differs"
	case differ("storage"):
		return fmt.Sprintf("its storage type changed (%s to %s), which a stream update cannot change back", then["storage"], now["storage"])
	case differ("retention") && (string(then["retention"]) == `"workqueue"` || string(now["retention"]) == `"workqueue"`):
		return "its retention changed to or from work queue, which a stream update cannot change back"
	case is(now, "sealed") && !is(then, "sealed"):
		return "it was sealed since, and a sealed stream cannot be unsealed"
	case is(now, "deny_delete") && !is(then, "deny_delete"):
		return "it denies message deletes since, which a stream update cannot cancel"
	case is(now, "deny_purge") && !is(then, "deny_purge"):
		return "it denies purges since, which a stream update cannot cancel"
	case is(now, "allow_msg_ttl") && !is(then, "allow_msg_ttl"):
		return "it allows per-message TTLs since, which cannot be turned off"
	case is(now, "allow_msg_schedules") && !is(then, "allow_msg_schedules"):
		return "it allows message schedules since, which cannot be turned off"
	case differ("allow_msg_counter"):
		return "its message counter setting changed, which a stream update cannot change back"
	case differ("persist_mode"):
		return "its persist mode changed, which a stream update cannot change back"
	case differ("mirror"):
		return "its mirror changed, which a stream update cannot change back"
	}
	return ""
}
