package busarchive_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// rechunk is arc's archive encoded again in s2 chunks of at most size
// decoded bytes, flushed at random lengths (so an entry's header often runs
// over chunks).
func rechunk(t *testing.T, arc []byte, size int, rng *rand.Rand) []byte {
	t.Helper()
	plain, err := io.ReadAll(s2.NewReader(bytes.NewReader(arc)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := s2.NewWriter(&out, s2.WriterConcurrency(1), s2.WriterBlockSize(4096))
	for len(plain) > 0 {
		n := min(len(plain), 1+rng.IntN(size))
		if _, err := zw.Write(plain[:n]); err != nil {
			t.Fatal(err)
		}
		if err := zw.Flush(); err != nil {
			t.Fatal(err)
		}
		plain = plain[n:]
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// cutArc passes arc through a CutWriter at cut, in writes of random sizes
// up to step.
func cutArc(t *testing.T, arc []byte, cut int64, step int, rng *rand.Rand) ([]byte, *busarchive.CutWriter) {
	t.Helper()
	var out bytes.Buffer
	cw := busarchive.NewCutWriter(&out, cut)
	for p := arc; len(p) > 0; {
		n := min(len(p), 1+rng.IntN(step))
		if m, err := cw.Write(p[:n]); err != nil || m != n {
			t.Fatalf("write: %d %v", m, err)
		}
		p = p[n:]
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), cw
}

// TestCutWriterEndsBeforeTheFirstMessageAfterTheCut: whatever the chunks
// and the writes, the archive cut holds exactly the messages stamped at or
// before the cut, reads to its end sentinel with the head and consumer
// unchanged, says the first message left out, and is the archive byte for
// byte when the cut is after every message.
func TestCutWriterEndsBeforeTheFirstMessageAfterTheCut(t *testing.T) {
	ms := arcMessages()
	arc := writeArc(t, arcHead(1), ms)
	rng := rand.New(rand.NewPCG(1, 2))
	cuts := []int64{ms[0].Time - 1}
	for _, m := range ms {
		cuts = append(cuts, m.Time)
	}
	for round := range 60 {
		src := arc
		if round%3 != 0 {
			src = rechunk(t, arc, []int{7, 60, 5000}[round%3], rng)
		}
		for _, cut := range cuts {
			got, cw := cutArc(t, src, cut, []int{1, 13, 1 << 20}[round%3], rng)
			var read []busarchive.ArchivedMessage
			consumers := 0
			head, err := busarchive.ReadStreamArchive(bytes.NewReader(got), func(string, []byte) error { consumers++; return nil },
				func(m busarchive.ArchivedMessage) error { read = append(read, m); return nil })
			if err != nil {
				t.Fatalf("round %d cut %d: %v", round, cut, err)
			}
			want := slices.DeleteFunc(slices.Clone(ms), func(m busarchive.ArchivedMessage) bool { return m.Time > cut })
			if len(read) != len(want) || consumers != 1 || head.LastSeq != 9 || head.Msgs != uint64(len(ms)) {
				t.Fatalf("round %d cut %d: %d messages, want %d; %d consumers; head %+v", round, cut, len(read), len(want), consumers, head)
			}
			for i := range want {
				if read[i].Seq != want[i].Seq || !bytes.Equal(read[i].Data, want[i].Data) {
					t.Fatalf("round %d cut %d: message %d is %d, want %d", round, cut, i, read[i].Seq, want[i].Seq)
				}
			}
			from, left := cw.LeftOut()
			if wantLeft := len(want) < len(ms); left != wantLeft || left && from != ms[len(want)].Seq {
				t.Fatalf("round %d cut %d: left out from %d (%v)", round, cut, from, left)
			}
			for _, memory := range []bool{false, true} {
				held, wantHeld := cw.Held(memory), busarchive.StreamCut{Msgs: uint64(len(want)), From: from}
				for _, m := range want {
					if wantHeld.FirstSeq == 0 {
						wantHeld.FirstSeq = m.Seq
					}
					wantHeld.LastSeq = m.Seq
					wantHeld.Bytes += busarchive.StoredSize(memory, len(m.Subject), len(m.Header), len(m.Data))
				}
				if held != wantHeld {
					t.Fatalf("round %d cut %d memory %v: held %+v, want %+v", round, cut, memory, held, wantHeld)
				}
			}
			if !left && !bytes.Equal(got, src) {
				t.Fatalf("round %d cut %d: nothing left out, yet the bytes changed", round, cut)
			}
		}
	}
}

// TestCutWriterRefusesWhatIsNoSnapshot: bytes that are not an s2 stream,
// or an s2 stream that is not an archive, fail the write.
func TestCutWriterRefusesWhatIsNoSnapshot(t *testing.T) {
	cw := busarchive.NewCutWriter(io.Discard, 0)
	if _, err := cw.Write([]byte("not an s2 stream at all")); err == nil {
		t.Fatal("plain bytes were taken")
	}
	var b bytes.Buffer
	zw := s2.NewWriter(&b)
	zw.Write([]byte("NATSARC0 and more"))
	zw.Close()
	cw = busarchive.NewCutWriter(io.Discard, 0)
	if _, err := cw.Write(b.Bytes()); err == nil {
		t.Fatal("an s2 stream that is no archive was taken")
	}
}

// cutArchive writes an archive of stream's snapshot (data, meta) cut at
// cut, its manifest's cut set by mark from what the CutWriter held.
func cutArchive(t *testing.T, path, stream string, data, meta []byte, cut int64, mark func(busarchive.StreamCut) busarchive.StreamCut) busarchive.StreamCut {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := busarchive.NewWriter(f, busarchive.WriterInfo{KeeperVersion: "test"})
	sw, err := w.Stream(stream)
	if err != nil {
		t.Fatal(err)
	}
	cw := busarchive.NewCutWriter(sw.Data(), cut)
	if _, err := cw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Meta().Write(meta); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Finish(); err != nil {
		t.Fatal(err)
	}
	held := cw.Held(false)
	if err := w.SetCut(stream, mark(held)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return held
}

// TestCutArchiveVerifiesAndRestoresAsItsCutSays: a server's snapshot cut
// at a message's time holds the messages up to it; its manifest's cut
// (messages, bytes, first and last held, first left out) verifies, and the
// server restores the stream with exactly those messages and bytes, and
// the snapshot's last sequence. A cut that says one message more does not
// verify.
func TestCutArchiveVerifiesAndRestoresAsItsCutSays(t *testing.T) {
	nc, js := startBus(t)
	publishArc(t, js)
	was := streamState(t, js, arcStream)
	stored := storedMessages(t, nc, arcStream, was.LastSeq) // 1, 2, 4, 5, 8
	data, meta := snapshotStream(t, nc, arcStream)
	dir := t.TempDir()
	same := func(c busarchive.StreamCut) busarchive.StreamCut { return c }
	held := cutArchive(t, filepath.Join(dir, "cut.tar"), arcStream, data, meta, stored[2].Time, same)
	var bytesHeld uint64
	for _, m := range stored[:3] {
		bytesHeld += busarchive.StoredSize(false, len(m.Subject), len(m.Header), len(m.Data))
	}
	if want := (busarchive.StreamCut{Msgs: 3, Bytes: bytesHeld, FirstSeq: 1, LastSeq: 4, From: 5}); held != want {
		t.Fatalf("held %+v, want %+v", held, want)
	}
	if _, err := busarchive.VerifyFile(testCtx(t), filepath.Join(dir, "cut.tar")); err != nil {
		t.Fatalf("the cut archive does not verify: %v", err)
	}
	a, c, err := busarchive.OpenFile(filepath.Join(dir, "cut.tar"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if sm := a.Manifest().Stream(arcStream); sm.Cut == nil || *sm.Cut != held || sm.State.Msgs != was.Msgs {
		t.Fatalf("the manifest's stream: %+v", sm)
	}
	if err := js.DeleteStream(testCtx(t), arcStream); err != nil {
		t.Fatal(err)
	}
	restoreArchive(t, nc, a)
	now := streamState(t, js, arcStream)
	if now.Msgs != held.Msgs || now.Bytes != held.Bytes || now.FirstSeq != 1 || now.LastSeq != was.LastSeq {
		t.Fatalf("restored %d messages, %d bytes, %d to %d; want %d, %d, 1 to %d", now.Msgs, now.Bytes, now.FirstSeq, now.LastSeq,
			held.Msgs, held.Bytes, was.LastSeq)
	}

	more := func(c busarchive.StreamCut) busarchive.StreamCut { c.Msgs++; return c }
	cutArchive(t, filepath.Join(dir, "wrong.tar"), arcStream, data, meta, stored[2].Time, more)
	if _, err := busarchive.VerifyFile(testCtx(t), filepath.Join(dir, "wrong.tar")); !errors.Is(err, busarchive.ErrMismatch) {
		t.Fatalf("a cut that says one message more: %v, want a mismatch", err)
	}
}
