package busarchive_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// checkedStream is a stream checkedWrite writes: a synth, or one whose
// backup.json does not say what its snapshot holds (lyingMeta).
type checkedStream interface {
	streamName() string
	writeData(w io.Writer) error
	meta() []byte
}

func (s synth) streamName() string { return s.name }

// checkedWrite writes the streams into a new archive, each stream's data
// and backup.json also through a StreamCheck (damage, when set, changes
// the check's copy of the data only), and returns the archive's path, its
// manifest and, per stream, what its check's Hold gave.
func checkedWrite(t *testing.T, ctx context.Context, damage func([]byte), streams ...checkedStream) (string, *busarchive.Manifest, []busarchive.StreamReport, int64, []error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bus.tar")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := busarchive.NewWriter(f, busarchive.WriterInfo{KeeperVersion: "test", ServerVersion: "2.15.3"})
	checks := map[string]*busarchive.StreamCheck{}
	metas := map[string][]byte{}
	for _, s := range streams {
		name := s.streamName()
		sw, err := w.Stream(name)
		if err != nil {
			t.Fatal(err)
		}
		c := busarchive.NewStreamCheck(ctx, name)
		checks[name] = c
		var data bytes.Buffer
		if err := s.writeData(&data); err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Data().Write(data.Bytes()); err != nil {
			t.Fatal(err)
		}
		copied := bytes.Clone(data.Bytes())
		if damage != nil {
			damage(copied)
		}
		// Written in pieces of odd sizes, as a writer hands them over.
		for b := copied; len(b) > 0; {
			n := min(len(b), 77_777)
			if _, err := c.Write(b[:n]); err != nil {
				break // the check stopped; Hold says why
			}
			b = b[n:]
		}
		c.Close()
		metas[name] = s.meta()
		if _, err := sw.Meta().Write(metas[name]); err != nil {
			t.Fatal(err)
		}
		if _, err := sw.Finish(); err != nil {
			t.Fatal(err)
		}
	}
	m, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	var reps []busarchive.StreamReport
	var n int64
	var problems []error
	for _, s := range streams {
		name := s.streamName()
		rep, sn, err := checks[name].Hold(m.Stream(name), metas[name])
		reps, n = append(reps, rep), n+sn
		if err != nil {
			problems = append(problems, err)
		}
	}
	return path, m, reps, n, problems
}

// TestStreamCheckIsVerify: an archive checked as it was written gives the
// report Verify gives when it reads it back, and the same bytes checked.
func TestStreamCheckIsVerify(t *testing.T) {
	streams := []checkedStream{synth{name: "ORDERS", msgs: 3000, size: 700, consumers: 2, seed: 1}, synth{name: "EMPTY", seed: 3}}
	path, _, reps, n, problems := checkedWrite(t, context.Background(), nil, streams...)
	if len(problems) > 0 {
		t.Fatalf("a whole archive was refused as written: %v", problems)
	}
	ar, c, err := busarchive.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want, err := ar.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reps, want.Streams) || n != want.Bytes {
		t.Fatalf("checked as written: %+v, %d bytes; Verify: %+v, %d bytes", reps, n, want.Streams, want.Bytes)
	}
	if !reps[0].Complete || reps[0].Messages != 3000 || reps[0].Consumers != 2 {
		t.Fatalf("ORDERS report %+v", reps[0])
	}
}

// TestStreamCheckRefuses: bytes that do not decode, and a backup.json
// whose state the snapshot does not hold, are refused with the problems
// Verify would name; a check whose context ended says it stopped.
func TestStreamCheckRefuses(t *testing.T) {
	orders := synth{name: "ORDERS", msgs: 2000, size: 500, consumers: 1, seed: 5}
	_, _, reps, _, problems := checkedWrite(t, context.Background(), func(b []byte) { b[len(b)/2] ^= 0x20 }, orders)
	if len(problems) != 1 || !errors.Is(problems[0], busarchive.ErrFormat) || reps[0].Complete {
		t.Fatalf("damaged bytes: %v, report %+v", problems, reps[0])
	}
	if p := busarchive.Problems(problems[0]); len(p) == 0 || p[0].Entry != busarchive.DataEntry("ORDERS") {
		t.Fatalf("damaged bytes: the problems name %v", p)
	}

	// A backup.json that counts more consumers than the snapshot holds.
	_, m, reps, _, problems := checkedWrite(t, context.Background(), nil, lyingMeta{synth: orders, consumers: 4})
	if len(problems) != 1 || !errors.Is(problems[0], busarchive.ErrMismatch) || reps[0].Complete ||
		!strings.Contains(problems[0].Error(), "the snapshot holds 1 consumers, the manifest records 4") {
		t.Fatalf("a backup.json of 4 consumers over a snapshot of 1: %v, report %+v", problems, reps[0])
	}

	// A check whose context ends stops, and its writer is not held up.
	cctx, cancel := context.WithCancel(context.Background())
	c := busarchive.NewStreamCheck(cctx, "ORDERS")
	cancel()
	var data bytes.Buffer // more than the check's blocks hold
	if err := (synth{name: "ORDERS", msgs: 8000, size: 500, seed: 7}).writeData(&data); err != nil {
		t.Fatal(err)
	}
	var werr error
	for b := data.Bytes(); len(b) > 0 && werr == nil; b = b[min(len(b), 4096):] {
		_, werr = c.Write(b[:min(len(b), 4096)])
	}
	if werr == nil {
		t.Fatal("every write to a check whose context ended was taken")
	}
	if _, _, err := c.Hold(m.Stream("ORDERS"), orders.meta()); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("a check whose context ended: %v", err)
	}
}

// lyingMeta is a synth whose backup.json gives another consumer count than
// its snapshot holds.
type lyingMeta struct {
	synth
	consumers int
}

func (l lyingMeta) meta() []byte {
	s := l.synth
	s.consumers = l.consumers
	return s.meta()
}
