package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/jsbus"
)

// writeCount is how many messages the module writes while the keeper is down.
const writeCount = 3

// moduleWrites is what a module wrote into the kept data's plain stream
// while the keeper was dead: one message per subject, each with a payload
// and a message id no other write has.
type moduleWrites struct {
	stream   string
	subjects []string
	payloads []string
	made     bool   // the stream was missing and the module made it again
	bytes    uint64 // what the writes add to a stream's stored bytes
}

// writeAsModule writes writeCount messages into <module>_<local> on subjects
// <module>.<local>.after.<token>.<i>, as an app would while the keeper is
// away: if the stream is missing it is made again with the same subjects,
// and a publish that is refused (a stream the dead keeper left restoring may
// refuse for a while) is tried again, with a message id so that a retry
// never stores a message twice.
func writeAsModule(t *testing.T, js jetstream.JetStream, module, local, step string) moduleWrites {
	t.Helper()
	n := sample.NamesOf(module, local)
	var tb [8]byte
	rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	w := moduleWrites{stream: n.Stream}
	for i := range writeCount {
		w.subjects = append(w.subjects, fmt.Sprintf("%s.%s.after.%s.%d", module, local, token, i))
		w.payloads = append(w.payloads, fmt.Sprintf("written by the module after the keeper was killed at %s (%s #%d)", step, token, i))
	}
	w.bytes = storedBytes(t, js, w, token)

	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for i := range writeCount {
		for {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			ack, err := js.Publish(pctx, w.subjects[i], []byte(w.payloads[i]), jetstream.WithMsgID(fmt.Sprintf("%s-w%d", token, i)))
			cancel()
			if err == nil {
				if ack.Stream != n.Stream || ack.Duplicate {
					t.Fatalf("the module's write %d went to stream %q (duplicate %v), not %s", i, ack.Stream, ack.Duplicate, n.Stream)
				}
				break
			}
			if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				if _, serr := js.Stream(cctx, n.Stream); errors.Is(serr, jetstream.ErrStreamNotFound) {
					_, cerr := js.CreateStream(cctx, jetstream.StreamConfig{
						Name: n.Stream, Subjects: []string{module + "." + local + ".>"}, Storage: jetstream.FileStorage,
					})
					if cerr == nil {
						w.made = true
						t.Logf("the module made %s again (it was missing after the crash at %s)", n.Stream, step)
					} else {
						err = fmt.Errorf("%w; making the stream again: %v", err, cerr)
					}
				}
				cancel()
			}
			if time.Now().After(deadline) {
				t.Fatalf("the module could not write into %s for a minute after the crash at %s: %v", n.Stream, step, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return w
}

// storedBytes measures, on the same server, what the writes add to a
// stream's bytes: the same messages with a subject and message id of the
// same lengths, into a scratch stream.
func storedBytes(t *testing.T, js jetstream.JetStream, w moduleWrites, token string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := "E2E_CALIBRATE_" + token
	prefix := strings.SplitN(w.subjects[0], ".", 3)
	calib := strings.Repeat("c", len(prefix[0])) + "." + strings.Repeat("k", len(prefix[1]))
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{calib + ".>"}, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatalf("make the scratch stream %s: %v", name, err)
	}
	defer js.DeleteStream(context.Background(), name)
	for i := range writeCount {
		subj := calib + w.subjects[i][len(calib):]
		if _, err := js.Publish(ctx, subj, []byte(w.payloads[i]), jetstream.WithMsgID(fmt.Sprintf("%s-c%d", token, i))); err != nil {
			t.Fatalf("publish to the scratch stream %s: %v", name, err)
		}
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("info of the scratch stream %s: %v", name, err)
	}
	if info.State.Msgs != writeCount {
		t.Fatalf("the scratch stream %s holds %d messages, not %d", name, info.State.Msgs, writeCount)
	}
	return info.State.Bytes
}

// liveIn lists the writes (by index) that the dumped state holds, each in
// its stream once, under its subject.
func (w moduleWrites) liveIn(got state) []int {
	var out []int
	for _, d := range got.kept.Streams {
		if d.Name != w.stream {
			continue
		}
		for i := range w.payloads {
			count := 0
			for _, m := range d.Messages {
				if m.Subject == w.subjects[i] && m.Text == w.payloads[i] {
					count++
				}
			}
			if count == 1 {
				out = append(out, i)
			}
		}
	}
	return out
}

// strip returns got with the module's writes taken out: only if they are,
// in order, the last messages of the plain stream, with nothing between
// them. The stream's state and its consumers' pending counts are taken back
// by what the writes added, so that the result compares equal to the state
// the writes were made on top of.
func (w moduleWrites) strip(got state) (state, bool) {
	out := got
	out.kept = &sample.Snapshot{Streams: slices.Clone(got.kept.Streams)}
	for si, d := range out.kept.Streams {
		if d.Name != w.stream {
			continue
		}
		if d.Missing || len(d.Messages) < writeCount || d.Msgs < writeCount || d.Bytes < w.bytes {
			return got, false
		}
		tail := d.Messages[len(d.Messages)-writeCount:]
		var seqs []uint64
		for i, m := range tail {
			if m.Subject != w.subjects[i] || m.Text != w.payloads[i] || m.Seq != d.LastSeq-uint64(writeCount-1-i) {
				return got, false
			}
			seqs = append(seqs, m.Seq)
		}
		d.Messages = d.Messages[:len(d.Messages)-writeCount]
		d.LastSeq -= writeCount
		d.Msgs -= writeCount
		d.Bytes -= w.bytes
		d.Consumers = slices.Clone(d.Consumers)
		for ci, c := range d.Consumers {
			matched := uint64(0)
			for _, s := range w.subjects {
				if filterMatches(c.FilterSubjects, s) {
					matched++
				}
			}
			if c.NumPending < matched {
				return got, false
			}
			c.NumPending -= matched
			if slices.Contains(seqs, c.Next) {
				c.Next = 0
			}
			d.Consumers[ci] = c
		}
		out.kept.Streams[si] = d
		return out, true
	}
	return got, false
}

// filterMatches reports whether subject passes a consumer's filters (none:
// every subject).
func filterMatches(filters []string, subject string) bool {
	if len(filters) == 0 {
		return true
	}
	for _, f := range filters {
		if sample.SubjectMatches(f, subject) {
			return true
		}
	}
	return false
}

// archivedWrites restores the plain stream of the archive in dir into a
// scratch embedded server and lists the writes (by index) it holds, each
// as the last message of its subject. ok is false when the archive does not
// hold the stream at all.
func (w moduleWrites) archivedWrites(t *testing.T, dir string) (held []int, ok bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	a, c, err := busarchive.OpenFile(filepath.Join(dir, "bus.tar"))
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer c.Close()
	if !slices.Contains(a.Streams(), w.stream) {
		return nil, false
	}
	s := natstest.Start(t, nil)
	nc := natstest.Connect(t, s)
	ad, err := jsbus.New(ctx, nc, jsbus.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	data, err := a.StreamData(w.stream)
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	meta, err := a.StreamMeta(w.stream)
	if err != nil {
		t.Fatal(err)
	}
	defer meta.Close()
	start := time.Now()
	if err := ad.Restore(ctx, w.stream, data, meta); err != nil {
		t.Fatalf("restore %s from %s into a scratch server: %v", w.stream, dir, err)
	}
	t.Logf("restored %s of %s into a scratch server in %s", w.stream, filepath.Base(dir), time.Since(start).Round(time.Millisecond))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, w.stream)
	if err != nil {
		t.Fatalf("the restored %s: %v", w.stream, err)
	}
	for i, subj := range w.subjects {
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("read %s from the restored %s: %v", subj, w.stream, err)
		}
		if string(m.Data) == w.payloads[i] {
			held = append(held, i)
		}
	}
	return held, true
}

func (w moduleWrites) String() string {
	b, _ := json.Marshal(w.payloads)
	return string(b)
}
