package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/kept"
)

const mib = 1 << 20

// fillBulk publishes random payloads of 1 KiB to 64 KiB, with headers, to
// <module>.<local>.bulk.<n> until at least total payload bytes are stored.
// It uses async publishes and waits for every ack.
func fillBulk(t *testing.T, js jetstream.JetStream, module, local string, total int64, seed uint64) int {
	t.Helper()
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 'e', '2', 'e'}))
	var sent int64
	n := 0
	for sent < total {
		size := 1024 + r.IntN(63*1024+1)
		data := make([]byte, size)
		for i := 0; i < size; i += 8 {
			v := r.Uint64()
			for j := 0; j < 8 && i+j < size; j++ {
				data[i+j] = byte(v >> (8 * j))
			}
		}
		m := nats.NewMsg(fmt.Sprintf("%s.%s.bulk.%d", module, local, n%16))
		m.Data = data
		m.Header.Set("Bulk-N", fmt.Sprint(n))
		if n%5 == 0 {
			m.Header.Add("Bulk-Tag", fmt.Sprintf("t%x", r.Uint32()))
			m.Header.Add("Bulk-Tag", "second")
		}
		if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil { // a loaded machine acknowledges slowly
			t.Fatalf("async publish %d: %v", n, err)
		}
		sent += int64(size)
		n++
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		t.Fatalf("the bus did not acknowledge %d async publishes within 5 minutes (%d pending)", n, js.PublishAsyncPending())
	}
	return n
}

// keptStreams are the streams of the sample's kept data.
func keptStreams(module, local string) []string {
	return sample.NamesOf(module, local).Streams()
}

// state is the kept data as the bus holds it, plus where the module's
// consumer on the shared stream stands (which a restore sets back).
type state struct {
	kept        *sample.Snapshot
	eventsFloor uint64
	otherFloor  uint64
}

func dumpState(t *testing.T, js jetstream.JetStream, module, local string) state {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	snap, err := sample.Dump(ctx, js, keptStreams(module, local)...)
	if err != nil {
		t.Fatalf("dump %s/%s: %v", module, local, err)
	}
	return state{kept: snap, eventsFloor: floor(t, js, sample.SharedStream, sample.NamesOf(module, local).Events),
		otherFloor: floor(t, js, sample.SharedStream, sample.OtherConsumer)}
}

// floor is the ack floor of a consumer; with nothing pending, the last
// delivered message (as sample.Dump counts it).
func floor(t *testing.T, js jetstream.JetStream, stream, consumer string) uint64 {
	t.Helper()
	c, err := js.Consumer(context.Background(), stream, consumer)
	if err != nil {
		t.Fatalf("consumer %s on %s: %v", consumer, stream, err)
	}
	ci := c.CachedInfo()
	f := ci.AckFloor.Stream
	if ci.NumAckPending == 0 && ci.Delivered.Stream > f {
		f = ci.Delivered.Stream
	}
	return f
}

// same says how b differs from a, or "".
func (a state) diff(b state) string {
	d := sample.Diff(a.kept, b.kept)
	if a.eventsFloor != b.eventsFloor {
		d += fmt.Sprintf("\n~ the module's consumer on %s: was at %d, now %d", sample.SharedStream, a.eventsFloor, b.eventsFloor)
	}
	if a.otherFloor != b.otherFloor {
		d += fmt.Sprintf("\n~ another module's consumer %s: was at %d, now %d", sample.OtherConsumer, a.otherFloor, b.otherFloor)
	}
	return strings.TrimSpace(d)
}

// streamStates are the (first, last, msgs, bytes) of each kept stream.
func (a state) streamStates() map[string][4]uint64 {
	out := map[string][4]uint64{}
	for _, s := range a.kept.Streams {
		out[s.Name] = [4]uint64{s.FirstSeq, s.LastSeq, s.Msgs, s.Bytes}
	}
	return out
}

// bytesOf is the stored bytes of the kept data.
func (a state) bytesOf() uint64 {
	var n uint64
	for _, s := range a.kept.Streams {
		n += s.Bytes
	}
	return n
}

// match returns which of the named states got equals ("" for none) and
// how got differs from each.
func match(got state, named map[string]state) (string, string) {
	var diffs []string
	names := make([]string, 0, len(named))
	for n := range named {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := named[n].diff(got)
		if d == "" {
			return n, ""
		}
		diffs = append(diffs, fmt.Sprintf("against %s:\n%s", n, d))
	}
	return "", strings.Join(diffs, "\n")
}

// matchOne is match that fails the test when got is none of the states.
func matchOne(t *testing.T, got state, named map[string]state) string {
	t.Helper()
	n, diffs := match(got, named)
	if n == "" {
		t.Errorf("the kept data on the bus is none of the known states — bytes were lost or mixed:\n%s", diffs)
	}
	return n
}

// archiveStates reads the stream states a bus.tar's manifest records.
func archiveStates(t *testing.T, path string) map[string][4]uint64 {
	t.Helper()
	a, c, err := busarchive.OpenFile(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer c.Close()
	out := map[string][4]uint64{}
	for _, s := range a.Manifest().Streams {
		out[s.Name] = [4]uint64{s.State.FirstSeq, s.State.LastSeq, s.State.Msgs, s.State.Bytes}
	}
	return out
}

func sameStates(a, b map[string][4]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// verifyArchive checks that dir holds a complete bus.tar that verifies.
func verifyArchive(t *testing.T, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := busarchive.VerifyFile(ctx, filepath.Join(dir, "bus.tar"))
	if err != nil {
		t.Errorf("%s does not verify: %v", dir, err)
		return
	}
	for _, s := range rep.Streams {
		if !s.Complete {
			t.Errorf("%s: stream %s is not complete in the archive", dir, s.Name)
		}
	}
}

// asides lists the aside ids under the keeper's dir (no .partial).
func asides(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(dir, "aside"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range es {
		if e.IsDir() && !strings.HasSuffix(e.Name(), ".partial") {
			ids = append(ids, e.Name())
		}
	}
	return ids
}

// asideReason is the reason aside.json of aside id under dir gives.
func asideReason(t *testing.T, dir, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "aside", id, "aside.json"))
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("aside.json of %s: %v", id, err)
	}
	return a.Reason
}

// leftovers lists every leftover of an unfinished write under dir: the file
// store's temporary files (.<name>.tmp…), and .partial directories and
// journal.json files, which keepers before stores left.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(d.Name(), ".partial") || d.Name() == "journal.json" || isTempFile(d.Name()) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// isTempFile: the file store's temporary files, .<name>.tmp<random>.
func isTempFile(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name[1:], ".tmp")
}

// indexKeys lists the keys of the keeper's `kept` bucket.
func indexKeys(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, err := js.KeyValue(ctx, "kept")
	if err != nil {
		t.Fatalf("open the kept bucket: %v", err)
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil
	}
	if err != nil {
		t.Fatalf("keys of kept: %v", err)
	}
	sort.Strings(keys)
	return keys
}

// staleKeys are the lease and journal keys of the kept bucket.
func staleKeys(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	var out []string
	for _, k := range indexKeys(t, js) {
		if strings.HasPrefix(k, "lease.") || strings.HasPrefix(k, "journal.") || strings.HasPrefix(k, "journal-part.") {
			out = append(out, k)
		}
	}
	return out
}

// waitNoStale polls until the kept bucket holds no lease, journal or journal part key and
// the keeper's dir no journal.json or .partial; it returns what is left
// after limit.
func waitNoStale(t *testing.T, js jetstream.JetStream, dir string, limit time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		left := append(staleKeys(t, js), leftovers(t, dir)...)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// lastAct is the last act recorded for verb.
func lastAct(t *testing.T, js jetstream.JetStream, verb string) (kept.Act, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, "KEEPER_ACTS")
	if err != nil {
		t.Fatalf("acts stream: %v", err)
	}
	m, err := s.GetLastMsgForSubject(ctx, "mesh-broker.acts."+verb)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return kept.Act{}, false
	}
	if err != nil {
		t.Fatalf("last act of %s: %v", verb, err)
	}
	var a kept.Act
	if err := json.Unmarshal(m.Data, &a); err != nil {
		t.Fatalf("act %q: %v", m.Data, err)
	}
	return a, true
}

// fileEntry is one path of a listing.
type fileEntry struct {
	Mode  fs.FileMode
	Size  int64
	MTime time.Time
	Link  string
}

// listing is every path under dir with its mode, size, mtime and link target.
func listing(t *testing.T, dir string) map[string]fileEntry {
	t.Helper()
	out := map[string]fileEntry{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		e := fileEntry{Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime()}
		if fi.Mode()&fs.ModeSymlink != 0 {
			e.Link, _ = os.Readlink(path)
		}
		if fi.IsDir() {
			e.Size = 0 // a directory's size follows its entries' names, which the mtime already shows
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "acts-queue" {
			// The acts queue directory changes with every act that passes
			// through it on its way to KEEPER_ACTS, a refused verb's
			// failed act too; an act left waiting in it still shows.
			return nil
		}
		out[rel] = e
		return nil
	})
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	return out
}

// mapDiff says how b differs from a, key by key ("- k", "~ k: a → b",
// "+ k: b"), or "".
func mapDiff[V comparable](a, b map[string]V) string {
	var out []string
	for k, va := range a {
		vb, ok := b[k]
		switch {
		case !ok:
			out = append(out, "- "+k)
		case va != vb:
			out = append(out, fmt.Sprintf("~ %s: %+v → %+v", k, va, vb))
		}
	}
	for k, vb := range b {
		if _, ok := a[k]; !ok {
			out = append(out, fmt.Sprintf("+ %s: %+v", k, vb))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}
