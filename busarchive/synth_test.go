package busarchive_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jsm.go/api"
	"github.com/nats-io/jsm.go/backup"

	"github.com/nats-keeper/nats-keeper/busarchive"
)

// synth describes a snapshot-like stream made without a server: a valid
// NATSARC1 stream.arc.s2 (jsm.go's encoder, the server's framing) and the
// backup.json jsm.go would write beside it.
type synth struct {
	name      string
	msgs      uint64
	size      int // payload bytes per message
	consumers int
	seed      uint64
}

func (s synth) state() api.StreamState {
	st := api.StreamState{Msgs: s.msgs, Bytes: s.msgs * uint64(s.size+40), FirstSeq: 1, LastSeq: s.msgs, Consumers: s.consumers}
	if s.msgs == 0 {
		st.FirstSeq, st.LastSeq = 1, 0
	}
	return st
}

// writeData encodes the stream archive into w, one message at a time.
func (s synth) writeData(w io.Writer) error {
	enc := backup.NewEncoder(w)
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	if err := enc.WriteState(ts, s.state()); err != nil {
		return err
	}
	for i := range s.consumers {
		data := fmt.Sprintf(`{"config":{"durable_name":"c%d","ack_policy":"explicit"},"state":{"delivered":{"consumer_seq":0,"stream_seq":0},"ack_floor":{"consumer_seq":0,"stream_seq":0}}}`, i)
		if err := enc.WriteConsumer(fmt.Sprintf("c%d", i), ts, []byte(data)); err != nil {
			return err
		}
	}
	r := rand.New(rand.NewPCG(s.seed, 7))
	body := make([]byte, s.size)
	for seq := uint64(1); seq <= s.msgs; seq++ {
		for i := 0; i < len(body); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8 && i+j < len(body); j++ {
				body[i+j] = byte(v >> (8 * j))
			}
		}
		m := &backup.Message{Subject: fmt.Sprintf("%s.m.%d", s.name, seq%100), Seq: seq, Ts: ts + int64(seq), PayloadSize: int64(len(body)), Body: &byteReader{b: body}}
		if err := enc.WriteMessage(m); err != nil {
			return err
		}
	}
	if err := enc.WriteEnd(); err != nil {
		return err
	}
	return enc.Close()
}

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// meta renders backup.json as jsm.go does.
func (s synth) meta() []byte {
	cfg := api.StreamConfig{Name: s.name, Subjects: []string{s.name + ".>"}, Storage: api.FileStorage, Retention: api.LimitsPolicy, Replicas: 1, MaxMsgs: -1, MaxBytes: -1, MaxAge: 0, MaxMsgSize: -1, MaxConsumers: -1, Discard: api.DiscardOld}
	st := s.state()
	b, err := json.MarshalIndent(map[string]any{"config": &cfg, "state": &st}, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

// feed writes the stream into the archive through a StreamWriter, as jsm.go's
// SnapshotToBuffer would, closing both writers.
func (s synth) feed(w *busarchive.Writer) (*busarchive.StreamManifest, error) {
	sw, err := w.Stream(s.name)
	if err != nil {
		return nil, err
	}
	data, meta := sw.Data(), sw.Meta()
	if err := s.writeData(data); err != nil {
		sw.Abort()
		return nil, err
	}
	if _, err := meta.Write(s.meta()); err != nil {
		sw.Abort()
		return nil, err
	}
	data.Close()
	meta.Close()
	return sw.Finish()
}

// writeSynthArchive writes a committed archive of the streams to a new file
// under t.TempDir() and returns its path.
func writeSynthArchive(t testing.TB, streams ...synth) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bus.tar")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := busarchive.NewWriter(f, busarchive.WriterInfo{KeeperVersion: "test", ServerVersion: "2.15.3", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	for _, s := range streams {
		if _, err := s.feed(w); err != nil {
			t.Fatalf("write stream %s: %v", s.name, err)
		}
	}
	if _, err := w.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return path
}
