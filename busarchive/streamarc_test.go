package busarchive_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/jsm.go"
	"github.com/nats-io/jsm.go/backup"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

const arcStream = "ARC"

// arcMessages are messages with gaps (3, 6 and 7 missing), headers on some,
// an empty body on one, for a head of first 1 and last 9 (a trailing gap).
func arcMessages() []busarchive.ArchivedMessage {
	base := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC).UnixNano()
	hdr := []byte("NATS/1.0\r\nX-Id: 7\r\n\r\n")
	return []busarchive.ArchivedMessage{
		{Seq: 1, Time: base, Subject: "arc.a", Data: []byte("one")},
		{Seq: 2, Time: base + 1, Subject: "arc.b", Header: hdr, Data: []byte("two")},
		{Seq: 4, Time: base + 1000, Subject: "arc.a", Header: hdr},
		{Seq: 5, Time: base + 2000, Subject: "arc.c.d", Data: bytes.Repeat([]byte{0, 1, 2}, 5000)},
		{Seq: 8, Time: base + 3000, Subject: "arc.a", Data: []byte("eight")},
	}
}

const arcConsumer = `{"config":{"durable_name":"d1","ack_policy":"explicit","deliver_policy":"all","ack_wait":30000000000,"max_deliver":-1,"replay_policy":"instant","num_replicas":0},"state":{"delivered":{"consumer_seq":2,"stream_seq":2},"ack_floor":{"consumer_seq":2,"stream_seq":2}}}`

func arcHead(consumers int) busarchive.ArchiveHead {
	ms := arcMessages()
	return busarchive.ArchiveHead{FirstSeq: 1, LastSeq: 9, Msgs: uint64(len(ms)), Bytes: 15300, FirstTime: ms[0].Time, LastTime: ms[len(ms)-1].Time, Consumers: consumers}
}

// writeArc writes an archive of head, a consumer entry d1 when the head
// declares one, and msgs.
func writeArc(t testing.TB, head busarchive.ArchiveHead, msgs []busarchive.ArchivedMessage) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := busarchive.NewStreamArchiveWriter(&buf, head)
	if err != nil {
		t.Fatal(err)
	}
	for i := range head.Consumers {
		if err := w.Consumer(fmt.Sprintf("d%d", i+1), []byte(arcConsumer)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range msgs {
		if err := w.Message(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readArc reads an archive whole.
func readArc(t testing.TB, r io.Reader) (*busarchive.ArchiveHead, []string, []busarchive.ArchivedMessage) {
	t.Helper()
	var names []string
	var msgs []busarchive.ArchivedMessage
	head, err := busarchive.ReadStreamArchive(r, func(name string, entry []byte) error {
		names = append(names, name+" "+string(entry))
		return nil
	}, func(m busarchive.ArchivedMessage) error {
		msgs = append(msgs, m)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return head, names, msgs
}

func TestStreamArchiveRoundTrip(t *testing.T) {
	head := arcHead(1)
	data := writeArc(t, head, arcMessages())
	got, consumers, msgs := readArc(t, bytes.NewReader(data))
	raw := got.Raw
	got.Raw = nil
	if !reflect.DeepEqual(*got, head) {
		t.Fatalf("head read back %+v, written %+v", *got, head)
	}
	if !reflect.DeepEqual(consumers, []string{"d1 " + arcConsumer}) {
		t.Fatalf("consumers read back %q", consumers)
	}
	if !reflect.DeepEqual(msgs, arcMessages()) {
		t.Fatalf("messages read back\n%+v\nwritten\n%+v", msgs, arcMessages())
	}
	// The head read back, Raw and all, writes the same head again.
	head.Raw = raw
	again := writeArc(t, head, arcMessages())
	got2, _, msgs2 := readArc(t, bytes.NewReader(again))
	if !bytes.Equal(got2.Raw, raw) || !reflect.DeepEqual(msgs2, msgs) {
		t.Fatalf("written again from its Raw head: %s, want %s", got2.Raw, raw)
	}
	// A Raw that disagrees with the fields is refused.
	head.LastSeq++
	if _, err := busarchive.NewStreamArchiveWriter(io.Discard, head); err == nil {
		t.Fatal("a head whose Raw disagrees with its fields was taken")
	}
	// jsm.go's decoder and Verify take it, and count what was written.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stream.arc.s2"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "backup.json"), synth{name: arcStream}.meta(), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := backup.Verify(dir)
	if err != nil {
		t.Fatalf("jsm.go Verify: %v", err)
	}
	if !rep.Complete || rep.Messages != 5 || rep.Consumers != 1 || rep.FirstSeq != 1 || rep.LastSeq != 8 {
		t.Fatalf("jsm.go Verify reports %+v", rep)
	}
}

func TestStreamArchiveWriterRefuses(t *testing.T) {
	ms := arcMessages()
	for _, c := range []struct {
		what string
		head busarchive.ArchiveHead
		do   func(w *busarchive.StreamArchiveWriter) error
	}{
		{"first 0 with a last", busarchive.ArchiveHead{LastSeq: 3}, nil},
		{"more messages than sequences", busarchive.ArchiveHead{FirstSeq: 2, LastSeq: 3, Msgs: 3}, nil},
		{"first above last+1", busarchive.ArchiveHead{FirstSeq: 5, LastSeq: 3}, nil},
		{"a message before the consumers", arcHead(1), func(w *busarchive.StreamArchiveWriter) error { return w.Message(ms[0]) }},
		{"a consumer too many", arcHead(0), func(w *busarchive.StreamArchiveWriter) error { return w.Consumer("x", []byte(arcConsumer)) }},
		{"a consumer without state", arcHead(1), func(w *busarchive.StreamArchiveWriter) error {
			return w.Consumer("x", []byte(`{"config":{}}`))
		}},
		{"a message out of order", arcHead(0), func(w *busarchive.StreamArchiveWriter) error {
			if err := w.Message(ms[1]); err != nil {
				return nil
			}
			return w.Message(ms[0])
		}},
		{"a message above last", arcHead(0), func(w *busarchive.StreamArchiveWriter) error {
			m := ms[0]
			m.Seq = 10
			return w.Message(m)
		}},
		{"a consumer missing at close", arcHead(1), func(w *busarchive.StreamArchiveWriter) error { return nil }},
	} {
		var buf bytes.Buffer
		w, err := busarchive.NewStreamArchiveWriter(&buf, c.head)
		if c.do == nil {
			if err == nil {
				t.Errorf("%s: the head was taken", c.what)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		err = c.do(w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			t.Errorf("%s: taken", c.what)
		}
		// What was written never ends as a whole archive.
		if _, rerr := busarchive.ReadStreamArchive(&buf, nil, nil); rerr == nil {
			t.Errorf("%s: the archive left behind reads whole", c.what)
		}
	}
}

// publishArc makes stream ARC on js with the messages of arcMessages'
// shape (subjects, headers, bodies; their times are the server's), with 3,
// 6, 7 and 9 deleted, and returns its config.
func publishArc(t testing.TB, js jetstream.JetStream) {
	t.Helper()
	ctx := testCtx(t)
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: arcStream, Subjects: []string{"arc.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 9; seq++ {
		m := nats.NewMsg(fmt.Sprintf("arc.%d", seq%3))
		m.Data = bytes.Repeat([]byte{byte(seq)}, int(seq*100))
		if seq%2 == 0 {
			m.Header.Set("X-Seq", fmt.Sprint(seq))
		}
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, seq := range []uint64{3, 6, 7, 9} {
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
}

// storedMessages is every message stream holds, as the server's message get
// API gives it (the header block as stored).
func storedMessages(t testing.TB, nc *nats.Conn, stream string, last uint64) []busarchive.ArchivedMessage {
	t.Helper()
	var out []busarchive.ArchivedMessage
	for seq := uint64(1); seq <= last; seq++ {
		req, _ := json.Marshal(map[string]uint64{"seq": seq})
		resp, err := nc.Request("$JS.API.STREAM.MSG.GET."+stream, req, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Message *struct {
				Subject string    `json:"subject"`
				Seq     uint64    `json:"seq"`
				Hdrs    []byte    `json:"hdrs"`
				Data    []byte    `json:"data"`
				Time    time.Time `json:"time"`
			} `json:"message"`
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(resp.Data, &r); err != nil {
			t.Fatal(err)
		}
		if r.Error != nil && r.Error.Code == 404 {
			continue
		}
		if r.Message == nil {
			t.Fatalf("message %d: %s", seq, resp.Data)
		}
		m := r.Message
		out = append(out, busarchive.ArchivedMessage{Seq: m.Seq, Time: m.Time.UnixNano(), Subject: m.Subject, Header: m.Hdrs, Data: m.Data})
	}
	return out
}

type nopWriteCloser struct{ *bytes.Buffer }

func (nopWriteCloser) Close() error { return nil }

// snapshotStream takes the server's snapshot of stream, consumers included:
// stream.arc.s2 and backup.json.
func snapshotStream(t testing.TB, nc *nats.Conn, stream string) (data, meta []byte) {
	t.Helper()
	mgr, err := jsm.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := mgr.LoadStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	var d, m bytes.Buffer
	if _, err := st.SnapshotToBuffer(testCtx(t), nopWriteCloser{&d}, nopWriteCloser{&m}, jsm.SnapshotConsumers()); err != nil {
		t.Fatal(err)
	}
	return d.Bytes(), m.Bytes()
}

// restoreStream restores stream from data and meta as jsbus does.
func restoreStream(t testing.TB, nc *nats.Conn, stream string, data, meta []byte) {
	t.Helper()
	mgr, err := jsm.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.RestoreSnapshotFromBuffer(testCtx(t), stream, io.NopCloser(bytes.NewReader(data)), io.NopCloser(bytes.NewReader(meta))); err != nil {
		t.Fatalf("restore %s: %v", stream, err)
	}
}

func streamState(t testing.TB, js jetstream.JetStream, stream string) jetstream.StreamState {
	t.Helper()
	s, err := js.Stream(testCtx(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

func TestReadStreamArchiveOfServerSnapshot(t *testing.T) {
	nc, js := startBus(t)
	publishArc(t, js)
	want := storedMessages(t, nc, arcStream, 9)
	if len(want) != 5 {
		t.Fatalf("the stream holds %d messages", len(want))
	}
	data, _ := snapshotStream(t, nc, arcStream)
	head, _, got := readArc(t, bytes.NewReader(data))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the snapshot reads\n%+v\nthe stream holds\n%+v", got, want)
	}
	// The last sequence (9) was deleted: the head still ends there.
	if head.FirstSeq != 1 || head.LastSeq != 9 || head.Msgs != 5 || head.FirstTime != want[0].Time || head.LastTime < want[4].Time {
		t.Fatalf("head %+v", head)
	}
}

func TestStreamArchiveWriterRestoredByServer(t *testing.T) {
	nc, js := startBus(t)
	publishArc(t, js)
	_, meta := snapshotStream(t, nc, arcStream)

	nc2, js2 := startBus(t)
	data := writeArc(t, arcHead(1), arcMessages())
	restoreStream(t, nc2, arcStream, data, meta)
	if got := storedMessages(t, nc2, arcStream, 12); !reflect.DeepEqual(got, arcMessages()) {
		t.Fatalf("restored\n%+v\nwritten\n%+v", got, arcMessages())
	}
	st := streamState(t, js2, arcStream)
	if st.FirstSeq != 1 || st.LastSeq != 9 || st.Msgs != 5 || st.NumDeleted != 4 || st.Consumers != 1 {
		t.Fatalf("restored state %+v", st)
	}
}

func TestBumpLastSeqRestoredByServer(t *testing.T) {
	nc, js := startBus(t)
	publishArc(t, js)
	want := storedMessages(t, nc, arcStream, 9)
	data, meta := snapshotStream(t, nc, arcStream)

	bumped, err := io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader(data), 1000))
	if err != nil {
		t.Fatal(err)
	}
	head, _, _ := readArc(t, bytes.NewReader(bumped))
	if head.LastSeq != 1000 || head.FirstSeq != 1 || head.Msgs != 5 {
		t.Fatalf("bumped head %+v", head)
	}
	nc2, js2 := startBus(t)
	restoreStream(t, nc2, arcStream, bumped, meta)
	if got := storedMessages(t, nc2, arcStream, 9); !reflect.DeepEqual(got, want) {
		t.Fatalf("restored\n%+v\nsnapshot of\n%+v", got, want)
	}
	if st := streamState(t, js2, arcStream); st.LastSeq != 1000 || st.Msgs != 5 || st.FirstSeq != 1 {
		t.Fatalf("restored state %+v", st)
	}
	ack, err := js2.Publish(testCtx(t), "arc.after", []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	if ack.Sequence != 1001 {
		t.Fatalf("a publish after the restore got sequence %d", ack.Sequence)
	}
}

func TestBumpLastSeqOfEmptyStream(t *testing.T) {
	nc, js := startBus(t)
	if _, err := js.CreateStream(testCtx(t), jetstream.StreamConfig{Name: arcStream, Subjects: []string{"arc.>"}}); err != nil {
		t.Fatal(err)
	}
	data, meta := snapshotStream(t, nc, arcStream)
	if head, _, _ := readArc(t, bytes.NewReader(data)); head.FirstSeq != 0 || head.LastSeq != 0 {
		t.Fatalf("the empty stream's head %+v", head)
	}
	bumped, err := io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader(data), 77))
	if err != nil {
		t.Fatal(err)
	}
	nc2, js2 := startBus(t)
	restoreStream(t, nc2, arcStream, bumped, meta)
	if st := streamState(t, js2, arcStream); st.LastSeq != 77 || st.Msgs != 0 {
		t.Fatalf("restored state %+v", st)
	}
	ack, err := js2.Publish(testCtx(t), "arc.after", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ack.Sequence != 78 {
		t.Fatalf("a publish after the restore got sequence %d", ack.Sequence)
	}

	// A stream emptied by a purge: its head's first is its last + 1.
	if err := js.DeleteStream(testCtx(t), arcStream); err != nil {
		t.Fatal(err)
	}
	publishArc(t, js)
	s, err := js.Stream(testCtx(t), arcStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	data, meta = snapshotStream(t, nc, arcStream)
	if head, _, _ := readArc(t, bytes.NewReader(data)); head.FirstSeq != 10 || head.LastSeq != 9 {
		t.Fatalf("the purged stream's head %+v", head)
	}
	if bumped, err = io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader(data), 50)); err != nil {
		t.Fatal(err)
	}
	nc3, js3 := startBus(t)
	restoreStream(t, nc3, arcStream, bumped, meta)
	if st := streamState(t, js3, arcStream); st.LastSeq != 50 || st.FirstSeq != 51 || st.Msgs != 0 {
		t.Fatalf("restored purged state %+v", st)
	}
	if ack, err = js3.Publish(testCtx(t), "arc.after", nil); err != nil || ack.Sequence != 51 {
		t.Fatalf("a publish after the restore of the purged stream: %+v, %v", ack, err)
	}
}

func TestBumpLastSeqAtOrBelowLeavesBytes(t *testing.T) {
	data := writeArc(t, arcHead(1), arcMessages())
	for _, last := range []uint64{0, 8, 9} {
		got, err := io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader(data), last))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("bump to %d of a head at 9 changed the archive", last)
		}
	}
	if _, err := io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader(data[:20]), 100)); err == nil {
		t.Fatal("a cut archive was bumped")
	}
	if _, err := io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader([]byte("not an archive at all")), 100)); err == nil {
		t.Fatal("a non-archive was bumped")
	}
}

func TestBumpLastSeqBigArchive(t *testing.T) {
	// 50 MB of random messages; the bump re-encodes only the head's chunk.
	const n, size = 50_000, 1000
	head := busarchive.ArchiveHead{FirstSeq: 1, LastSeq: n, Msgs: n, Bytes: n * (size + 60)}
	var buf bytes.Buffer
	w, err := busarchive.NewStreamArchiveWriter(&buf, head)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, size)
	state := uint64(1)
	for seq := uint64(1); seq <= n; seq++ {
		for i := range body {
			state = state*6364136223846793005 + 1442695040888963407
			body[i] = byte(state >> 56)
		}
		if err := w.Message(busarchive.ArchivedMessage{Seq: seq, Time: int64(seq), Subject: fmt.Sprintf("big.%d", seq%10), Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	bumped, err := io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader(data), n+5000))
	if err != nil {
		t.Fatal(err)
	}
	// Only the first chunk (1 MiB of messages at most) is encoded again.
	if d := len(bumped) - len(data); d < -(1<<20) || d > 1<<20 {
		t.Fatalf("the bump changed the size by %d bytes of %d", d, len(data))
	}
	if !bytes.Equal(bumped[len(bumped)-(40<<20):], data[len(data)-(40<<20):]) {
		t.Fatal("the bump changed the archive's tail")
	}
	sums := func(b []byte) (*busarchive.ArchiveHead, []string) {
		var out []string
		h, err := busarchive.ReadStreamArchive(bytes.NewReader(b), nil, func(m busarchive.ArchivedMessage) error {
			out = append(out, fmt.Sprintf("%d %d %s %x", m.Seq, m.Time, m.Subject, m.Data))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return h, out
	}
	h1, m1 := sums(data)
	h2, m2 := sums(bumped)
	if len(m1) != n || !reflect.DeepEqual(m1, m2) {
		t.Fatalf("the bumped archive reads %d messages, the archive %d, or other ones", len(m2), len(m1))
	}
	if h1.LastSeq != n || h2.LastSeq != n+5000 || h2.FirstSeq != 1 || h2.Msgs != n {
		t.Fatalf("heads %+v and %+v", h1, h2)
	}
}

func TestReadStreamArchiveStopsOnCallbackError(t *testing.T) {
	data := writeArc(t, arcHead(1), arcMessages())
	stop := errors.New("stop")
	var seen int
	_, err := busarchive.ReadStreamArchive(bytes.NewReader(data), nil, func(m busarchive.ArchivedMessage) error {
		seen++
		if m.Seq == 4 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || seen != 3 {
		t.Fatalf("err %v after %d messages", err, seen)
	}
	if _, err := busarchive.ReadStreamArchive(bytes.NewReader(data), func(string, []byte) error { return stop }, nil); !errors.Is(err, stop) {
		t.Fatalf("err %v from a consumer callback's error", err)
	}
	if _, err := busarchive.ReadStreamArchive(bytes.NewReader(data[:len(data)-3]), nil, nil); err == nil {
		t.Fatal("a cut archive read whole")
	}
}
