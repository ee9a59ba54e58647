package busarchive_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/nats-io/jsm.go/backup"
	"github.com/nats-io/nats-server/v2/server/archive"

	"github.com/nats-keeper/nats-keeper/busarchive"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// writeBackupDir writes stream.arc.s2 and backup.json into a new directory.
func writeBackupDir(t testing.TB, data, meta []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stream.arc.s2"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "backup.json"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestStreamArchiveNatsCLI: `nats backup validate` and `nats backup
// restore` (natscli v0.5.0) take an archive StreamArchiveWriter wrote and a
// server snapshot BumpLastSeq raised.
func TestStreamArchiveNatsCLI(t *testing.T) {
	natsCLI := tools.NatsCLI(t)
	nc, js := startBus(t)
	publishArc(t, js)
	want := storedMessages(t, nc, arcStream, 9)
	snap, meta := snapshotStream(t, nc, arcStream)
	bumped, err := io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader(snap), 500))
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, c := range []struct {
		what string
		data []byte
		want []busarchive.ArchivedMessage
		last uint64
	}{
		{"written", writeArc(t, arcHead(1), arcMessages()), arcMessages(), 9},
		{"bumped", bumped, want, 500},
	} {
		dir := writeBackupDir(t, c.data, meta)
		nc2, js2 := startBus(t)
		for _, args := range [][]string{{"backup", "validate", dir}, {"backup", "restore", "stream", "--no-progress", dir}} {
			cmd := exec.Command(natsCLI, append([]string{"--no-context", "-s", nc2.ConnectedUrl()}, args...)...)
			cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "NATS_CONTEXT=")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: nats %v: %v\n%s", c.what, args, err, out)
			}
		}
		if got := storedMessages(t, nc2, arcStream, 9); !reflect.DeepEqual(got, c.want) {
			t.Fatalf("%s: restored by the nats CLI\n%+v\nwant\n%+v", c.what, got, c.want)
		}
		if st := streamState(t, js2, arcStream); st.LastSeq != c.last || st.Msgs != 5 {
			t.Fatalf("%s: restored by the nats CLI: %+v", c.what, st)
		}
	}
}

// TestBumpLastSeqLargeHeadSmallChunks bumps an archive whose state.json
// spans several s2 chunks (small blocks, a head with a subjects map), with
// padding and an s2 index, and checks every reader still takes it.
func TestBumpLastSeqLargeHeadSmallChunks(t *testing.T) {
	subjects := map[string]uint64{}
	for i := range 1500 {
		subjects[fmt.Sprintf("arc.subject.%d", i)] = 1
	}
	st := map[string]any{"messages": 5, "bytes": 15300, "first_seq": 1, "first_ts": "2026-03-04T05:06:07.000000008Z",
		"last_seq": 9, "last_ts": "0001-01-01T00:00:00Z", "subjects": subjects, "consumer_count": 1}
	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if len(js) < 16<<10 {
		t.Fatalf("state.json is only %d bytes", len(js))
	}
	var buf bytes.Buffer
	zw := s2.NewWriter(&buf, s2.WriterBlockSize(4<<10), s2.WriterPadding(1000), s2.WriterAddIndex())
	aw := archive.NewWriter(zw)
	put := func(h archive.Header, parts ...[]byte) {
		var n int
		for _, p := range parts {
			n += len(p)
		}
		h.PayloadSize = int64(n) - h.HeaderSize
		if err := aw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if _, err := aw.Write(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(archive.Header{Name: "state.json", Timestamp: 42}, js)
	put(archive.Header{Name: "consumers/d1", Timestamp: 42}, []byte(arcConsumer))
	for _, m := range arcMessages() {
		put(archive.Header{Name: m.Subject, Sequence: m.Seq, Timestamp: m.Time, HeaderSize: int64(len(m.Header))}, m.Header, m.Data)
	}
	put(archive.Header{})
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	head, consumers, msgs := readArc(t, bytes.NewReader(data))

	bumped, err := io.ReadAll(busarchive.BumpLastSeq(bytes.NewReader(data), 90))
	if err != nil {
		t.Fatal(err)
	}
	head2, consumers2, msgs2 := readArc(t, bytes.NewReader(bumped))
	if !reflect.DeepEqual(msgs2, msgs) || !reflect.DeepEqual(msgs, arcMessages()) || !reflect.DeepEqual(consumers2, consumers) {
		t.Fatal("the bumped archive reads other messages or consumers")
	}
	var was, now map[string]any
	if err := json.Unmarshal(head.Raw, &was); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(head2.Raw, &now); err != nil {
		t.Fatal(err)
	}
	was["last_seq"] = float64(90)
	if !reflect.DeepEqual(was, now) || head2.LastSeq != 90 {
		t.Fatalf("the bumped head differs in more than last_seq: %s", head2.Raw)
	}
	// jsm.go's Verify takes it too.
	rep, err := backup.Verify(writeBackupDir(t, bumped, synth{name: arcStream}.meta()))
	if err != nil || !rep.Complete || rep.Messages != 5 {
		t.Fatalf("jsm.go Verify of the bumped archive: %+v, %v", rep, err)
	}
}
