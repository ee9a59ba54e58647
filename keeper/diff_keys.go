package keeper

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/kept"
)

// The keys of a KV bucket and the objects of an object store a diff
// names. A key's state is its last message: a put holds a value, a delete
// or purge marker (KV-Operation DEL or PURGE) says it is gone; an object's
// state is its last meta message ($O.<bucket>.M.<name>), whose JSON names
// it and says whether it was deleted. Only the keys whose last message
// may differ are looked at: those the live tail (the messages after the
// point) wrote, and those of the point's messages no longer live. Their
// state at the point is read from the point's archive; their live state
// from the tail, or, for a key the tail did not write, from the stream's
// last message of that subject. No other value is read.

// Kinds of stream (kept.StreamChange.Kind).
const (
	kindKV     = "kv"
	kindObject = "object-store"
	kindStream = "stream"
)

// streamKind is what the stream name with subjects holds, and the prefix
// of its key subjects ("$KV.<bucket>." or "$O.<bucket>.M."; "" for a plain
// stream).
func streamKind(name string, subjects []string) (kind, prefix string) {
	if b, ok := strings.CutPrefix(name, "KV_"); ok && slices.Contains(subjects, "$KV."+b+".>") {
		return kindKV, "$KV." + b + "."
	}
	if b, ok := strings.CutPrefix(name, "OBJ_"); ok && slices.Contains(subjects, "$O."+b+".M.>") {
		return kindObject, "$O." + b + ".M."
	}
	return kindStream, ""
}

// keyAt is one key's (or object's) last message: its sequence, whether it
// says the key is gone, and (an object) its name.
type keyAt struct {
	seq  uint64
	gone bool
	name string
}

// keyDiff gathers the keys of one bucket or store a diff looks at.
type keyDiff struct {
	kind, prefix string
	then         map[string]keyAt // subject → the point's last message of it
	now          map[string]keyAt // subject → the live last message, of the keys looked at
	touched      map[string]bool  // the subjects whose state may differ
}

func newKeyDiff(kind, prefix string) *keyDiff {
	return &keyDiff{kind: kind, prefix: prefix, then: map[string]keyAt{}, now: map[string]keyAt{}, touched: map[string]bool{}}
}

// keyOf reads a message of the stream as a key's state; ok is false for a
// message that is none (an object's chunk).
func (d *keyDiff) keyOf(seq uint64, subject string, header, data []byte) (keyAt, bool) {
	if !strings.HasPrefix(subject, d.prefix) {
		return keyAt{}, false
	}
	if d.kind == kindKV {
		op := headerValue(header, "KV-Operation")
		return keyAt{seq: seq, gone: op == "DEL" || op == "PURGE", name: subject[len(d.prefix):]}, true
	}
	var meta struct {
		Name    string `json:"name"`
		Deleted bool   `json:"deleted"`
	}
	if json.Unmarshal(data, &meta) != nil || meta.Name == "" {
		// Named by its subject: the name in base64url.
		name, err := base64.URLEncoding.DecodeString(subject[len(d.prefix):])
		if err != nil {
			name = []byte(subject[len(d.prefix):])
		}
		meta.Name = string(name)
	}
	return keyAt{seq: seq, gone: meta.Deleted, name: meta.Name}, true
}

// point takes one of the point's messages; removed says it is no longer
// live.
func (d *keyDiff) point(seq uint64, subject string, header, data []byte, removed bool) {
	if k, ok := d.keyOf(seq, subject, header, data); ok {
		d.then[subject] = k
		if removed {
			d.touched[subject] = true
		}
	}
}

// live takes one live message (of the tail, or a subject's last).
func (d *keyDiff) live(m Message) {
	if k, ok := d.keyOf(m.Seq, m.Subject, m.Header, m.Data); ok {
		if was, seen := d.now[m.Subject]; !seen || was.seq < k.seq {
			d.now[m.Subject] = k
		}
		d.touched[m.Subject] = true
	}
}

// errEnough stops the reading of an archive that gave what was wanted.
var errEnough = errors.New("read enough")

// readPointMessages reads the point's messages of stream from its archive
// (checked against its manifest as it is read): each one no longer live
// into removed (nil: none wanted), and each into kd (nil: none).
func readPointMessages(ctx context.Context, a *openedArchive, stream string, ls liveSeqs, kd *keyDiff, removed *rangeList) error {
	rc, err := a.CheckedStreamData(ctx, stream)
	if err != nil {
		return pointReadError(a, stream, err)
	}
	defer rc.Close()
	_, err = busarchive.ReadStreamArchive(rc, nil, func(m busarchive.ArchivedMessage) error {
		gone := !ls.has(m.Seq)
		if gone && removed != nil && !removed.add(m.Seq, m.Seq) && kd == nil {
			return errEnough
		}
		if kd != nil {
			kd.point(m.Seq, m.Subject, m.Header, m.Data, gone)
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return pointReadError(a, stream, err)
	}
	return nil
}

// pointReadError is the error of reading the point's stream: the archive
// is damaged where busarchive found problems in it, else the reading
// failed.
func pointReadError(a *openedArchive, stream string, err error) error {
	if len(busarchive.Problems(err)) > 0 {
		return &DamagedError{Path: a.Where, Problems: problemSentences(err)}
	}
	return fmt.Errorf("reading the point's stream %s: %w", stream, withKind(ErrFailed, err))
}

// maxLastProbes bounds the keys whose live state is asked for one by one;
// past it, the last message of every key is read once.
const maxLastProbes = 64

// readLast reads the live state of the keys looked at that the tail did
// not write: their subjects' last messages.
func (d *keyDiff) readLast(ctx context.Context, bus MessageBus, stream string) error {
	var missing []string
	for s := range d.touched {
		if _, ok := d.now[s]; !ok {
			missing = append(missing, s)
		}
	}
	if len(missing) > maxLastProbes {
		return bus.LastBySubject(ctx, stream, d.prefix+">", func(m Message) error {
			if d.touched[m.Subject] {
				d.live(m)
			}
			return nil
		})
	}
	for _, s := range missing {
		if err := bus.LastBySubject(ctx, stream, s, func(m Message) error { d.live(m); return nil }); err != nil {
			return err
		}
	}
	return nil
}

// changes counts the keys added, changed and deleted, and names those
// after the cursor name (exclusive; from the start when start), sorted by
// name, at most limit of them ("+k", "~k", "-k"); cut says some were left
// out.
func (d *keyDiff) changes(after string, start bool, limit int) (kc *kept.KeyChanges, cut bool) {
	type named struct{ name, entry string }
	var all []named
	kc = &kept.KeyChanges{}
	for s := range d.touched {
		t, hadT := d.then[s]
		n, hasN := d.now[s]
		was, is := hadT && !t.gone, hasN && !n.gone
		name := n.name
		if !hasN {
			name = t.name
		}
		var mark string
		switch {
		case !was && is:
			kc.Added++
			mark = "+"
		case was && !is:
			kc.Deleted++
			mark = "-"
		case was && is && t.seq != n.seq:
			kc.Changed++
			mark = "~"
		default:
			continue
		}
		if start || name > after {
			all = append(all, named{name, mark + name})
		}
	}
	slices.SortFunc(all, func(x, y named) int { return strings.Compare(x.name, y.name) })
	if len(all) > limit {
		all, cut = all[:limit], true
	}
	for _, n := range all {
		kc.Names = append(kc.Names, n.entry)
	}
	return kc, cut
}
