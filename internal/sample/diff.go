package sample

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// maxDiffLines bounds what Diff reports.
const maxDiffLines = 60

// Lines renders the snapshot as keyed lines, one per stream state, message
// and consumer; two snapshots are equal when their lines are.
func (s *Snapshot) Lines() map[string]string {
	out := map[string]string{}
	if s == nil {
		return out
	}
	for _, d := range s.Streams {
		if d.Missing {
			out[d.Name+" state"] = "missing"
			continue
		}
		out[d.Name+" state"] = fmt.Sprintf("subjects=%v replicas=%d first=%d last=%d msgs=%d bytes=%d consumers=%d",
			d.Subjects, d.Replicas, d.FirstSeq, d.LastSeq, d.Msgs, d.Bytes, len(d.Consumers))
		for _, m := range d.Messages {
			out[fmt.Sprintf("%s msg %010d", d.Name, m.Seq)] = fmt.Sprintf("subject=%s time=%s size=%d sha256=%s header=%s text=%q",
				m.Subject, m.Time.Format("2006-01-02T15:04:05.000000000Z"), m.Size, m.SHA256, headerText(m.Header), m.Text)
		}
		for _, c := range d.Consumers {
			out[d.Name+" consumer "+c.Name] = fmt.Sprintf("durable=%s filters=%v ack=%s ack_floor=%d pending=%d ack_pending=%d next=%d",
				c.Durable, c.FilterSubjects, c.AckPolicy, c.AckFloor, c.NumPending, c.NumAckPending, c.Next)
		}
	}
	return out
}

func headerText(h map[string][]string) string {
	keys := slices.Sorted(maps.Keys(h))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+strings.Join(h[k], ","))
	}
	return "{" + strings.Join(parts, ";") + "}"
}

// Diff describes how b differs from a, one line per difference (at most 60),
// or "" when they are equal.
//
// A stream of b whose last sequence is past a's, holding as many messages,
// is taken as a's last sequence (and, empty, its first): a restore over live
// data keeps the live last sequence (a full restore bumps it, a delta
// leaves the removed tail a gap), which no message shows; every message is
// still compared. Tests of the last sequence itself read it.
func Diff(a, b *Snapshot) string {
	la, lb := a.Lines(), lastKeptAs(a, b).Lines()
	keys := slices.Sorted(maps.Keys(la))
	for k := range lb {
		if _, ok := la[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		va, oka := la[k]
		vb, okb := lb[k]
		switch {
		case !okb:
			out = append(out, fmt.Sprintf("- %s: %s", k, va))
		case !oka:
			out = append(out, fmt.Sprintf("+ %s: %s", k, vb))
		case va != vb:
			out = append(out, fmt.Sprintf("~ %s:\n    was %s\n    now %s", k, va, vb))
		}
	}
	if len(out) > maxDiffLines {
		out = append(out[:maxDiffLines], fmt.Sprintf("… and %d more differences", len(out)-maxDiffLines))
	}
	return strings.Join(out, "\n")
}

// lastKeptAs is b with the last sequence of each stream that a holds with
// as many messages and a lower last sequence lowered to a's.
func lastKeptAs(a, b *Snapshot) *Snapshot {
	if a == nil || b == nil {
		return b
	}
	out := &Snapshot{Streams: slices.Clone(b.Streams)}
	for i, d := range out.Streams {
		for _, w := range a.Streams {
			if w.Name != d.Name || w.Missing || d.Missing || d.Msgs != w.Msgs || d.LastSeq <= w.LastSeq {
				continue
			}
			if d.LastSeq = w.LastSeq; d.Msgs == 0 {
				d.FirstSeq = w.FirstSeq
			}
			out.Streams[i] = d
		}
	}
	return out
}

// Entry is one KV key's current value and revision.
type Entry struct {
	Value    string
	Revision uint64
}

// KV returns every live key of the bucket with its value and revision.
func KV(ctx context.Context, js jetstream.JetStream, bucket string) (map[string]Entry, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("sample: open KV bucket %s: %w", bucket, err)
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return map[string]Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sample: list keys of %s: %w", bucket, err)
	}
	out := make(map[string]Entry, len(keys))
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			return nil, fmt.Errorf("sample: get %s from %s: %w", k, bucket, err)
		}
		out[k] = Entry{Value: string(e.Value()), Revision: e.Revision()}
	}
	return out, nil
}

// Object returns the bytes of one object of the store.
func Object(ctx context.Context, js jetstream.JetStream, store, name string) ([]byte, error) {
	obs, err := js.ObjectStore(ctx, store)
	if err != nil {
		return nil, fmt.Errorf("sample: open object store %s: %w", store, err)
	}
	b, err := obs.GetBytes(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("sample: get object %s from %s: %w", name, store, err)
	}
	return b, nil
}
