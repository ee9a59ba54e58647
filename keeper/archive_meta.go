package keeper

import (
	"encoding/json"
	"time"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// The backup.json of a stream archive the keeper writes itself (a delta's
// tail, a logical restore's values, a moment's stream, a capture segment).

// tailMeta is a tail's backup.json: the live configuration, and the
// tail's state as the server writes a stream's, but num_subjects, which is
// the whole stream's when it was set aside (subjects, the count of a KV
// bucket's keys or an object store's objects and chunks, which the evidence
// of a put back checks, as for a stream set aside whole).
func tailMeta(config json.RawMessage, h busarchive.ArchiveHead, first, last int64, subjects uint64) ([]byte, error) {
	ts := func(ns int64) time.Time {
		if ns == 0 {
			return time.Time{}
		}
		return time.Unix(0, ns).UTC()
	}
	return json.Marshal(struct {
		Config json.RawMessage `json:"config"`
		State  any             `json:"state"`
	}{config, struct {
		Msgs      uint64    `json:"messages"`
		Bytes     uint64    `json:"bytes"`
		FirstSeq  uint64    `json:"first_seq"`
		FirstTime time.Time `json:"first_ts"`
		LastSeq   uint64    `json:"last_seq"`
		LastTime  time.Time `json:"last_ts"`
		Subjects  uint64    `json:"num_subjects,omitempty"`
		Consumers int       `json:"consumer_count"`
	}{h.Msgs, h.Bytes, h.FirstSeq, ts(first), h.LastSeq, ts(last), subjects, h.Consumers}})
}
