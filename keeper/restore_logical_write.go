package keeper

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// How a logical restore writes one key's value as a new revision, with
// bus.Publish, removing nothing:
//
//   - a KV key: the source's headers and data on the key's subject; a
//     delete marker (KV-Operation: DEL, as nats.go's Delete writes it, with
//     no rollup) where the source had none, or a delete or purge marker;
//   - an object: its chunks, then its meta on the object's meta subject.
//     Chunks still on the bus under the meta's nuid are not written again
//     (nats.go writes an object's chunks whole or purges them, and purges
//     them whole); else they are written under a new nuid that the meta
//     then names, so a run stopped half-way through an object's chunks
//     leaves them under a nuid no meta names, never beside the object's. An
//     object absent in the source gets a delete meta as nats.go's Delete
//     writes it: its live meta, deleted, with size,
//     chunks and digest cleared (its chunks are not purged).
//
// Headers that would make the server remove or refuse (Nats-Rollup, a
// purge's; Nats-Msg-Id, deduplicated; Nats-Expected-*) are not written.

// kvDelete is the header of a KV delete marker.
var kvDelete = []byte("NATS/1.0\r\nKV-Operation: DEL\r\n\r\n")

// writeKey writes the source's value of key in ls as a new revision.
func (x *logicalRun) writeKey(ctx context.Context, ls *logicalStream, key logicalKey) error {
	switch {
	case !ls.object && key.want == nil:
		_, err := x.bus.Publish(ctx, key.subject, kvDelete, nil)
		return err
	case !ls.object:
		_, err := x.bus.Publish(ctx, key.subject, writableHeader(key.want.Header), key.want.Data)
		return err
	case key.want == nil:
		return x.deleteObject(ctx, key)
	}
	return x.writeObject(ctx, ls, key.want)
}

// writeObject writes the object whose meta is want: its chunks where they
// are not whole on the bus, then its meta.
func (x *logicalRun) writeObject(ctx context.Context, ls *logicalStream, want *busarchive.ArchivedMessage) error {
	var m objectMeta
	if err := json.Unmarshal(want.Data, &m); err != nil || m.NUID == "" {
		return fmt.Errorf("the meta of %s does not name its chunks (%v)", want.Subject, err)
	}
	cs := ls.chunkSubject(m.NUID)
	n, err := x.bus.SubjectCount(ctx, ls.name, cs)
	if err != nil {
		return fmt.Errorf("counting the chunks of object %s: %w", m.Name, err)
	}
	meta := want.Data
	if n == 0 && m.Chunks > 0 {
		src := ls.chunks[cs]
		if uint64(len(src)) != m.Chunks {
			return fmt.Errorf("object %s has %d chunk(s) in what it is restored from, not the %d its meta names", m.Name, len(src), m.Chunks)
		}
		nuid := newNUID()
		if meta, err = withNUID(want.Data, nuid); err != nil {
			return err
		}
		for _, c := range src {
			if _, err := x.bus.Publish(ctx, ls.chunkSubject(nuid), writableHeader(c.Header), c.Data); err != nil {
				return fmt.Errorf("writing chunk %d of object %s: %w", c.Seq, m.Name, err)
			}
		}
	}
	_, err = x.bus.Publish(ctx, want.Subject, writableHeader(want.Header), meta)
	return err
}

// deleteObject writes a delete meta for the live object of key.
func (x *logicalRun) deleteObject(ctx context.Context, key logicalKey) error {
	if key.live == nil {
		return nil // no live object: nothing to delete
	}
	var info map[string]any
	if err := json.Unmarshal(key.live.Data, &info); err != nil {
		return fmt.Errorf("the live meta of %s does not decode: %w", key.subject, err)
	}
	info["deleted"], info["size"], info["chunks"], info["mtime"] = true, 0, 0, "0001-01-01T00:00:00Z"
	delete(info, "digest")
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	_, err = x.bus.Publish(ctx, key.subject, nil, data)
	return err
}

// withNUID is an object's meta with its nuid replaced.
func withNUID(meta []byte, nuid string) ([]byte, error) {
	var info map[string]json.RawMessage
	if err := json.Unmarshal(meta, &info); err != nil {
		return nil, err
	}
	info["nuid"], _ = json.Marshal(nuid)
	return json.Marshal(info)
}

// newNUID is a new random chunk id, 22 characters of [0-9A-Za-z] as
// nats.go's nuid gives.
func newNUID() string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 22)
	rand.Read(b)
	for i := range b {
		b[i] = digits[int(b[i])%len(digits)]
	}
	return string(b)
}

// writableHeader is a stored header block without the headers that would
// make the server remove messages or refuse the write; nil when none is
// left.
func writableHeader(header []byte) []byte {
	lines := headerLines(header)
	var b strings.Builder
	kept := 0
	for _, line := range lines {
		k, _, _ := strings.Cut(line, ":")
		k = strings.ToLower(strings.TrimSpace(k))
		if k == "nats-rollup" || k == "nats-msg-id" || strings.HasPrefix(k, "nats-expected-") {
			continue
		}
		if kept == 0 {
			b.WriteString("NATS/1.0\r\n")
		}
		b.WriteString(line + "\r\n")
		kept++
	}
	if kept == 0 {
		return nil
	}
	b.WriteString("\r\n")
	return []byte(b.String())
}
