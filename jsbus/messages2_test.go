package jsbus_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

func TestLastBySubjectGivesEachKeysLastEntry(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	kv, err := b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "settings", History: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]uint64{} // key: the revision of its last entry
	for i := range 300 {
		key := fmt.Sprintf("k%d", i%100)
		rev, err := kv.Put(ctx, key, fmt.Appendf(nil, "v%d", i))
		if err != nil {
			t.Fatal(err)
		}
		want[key] = rev
	}
	if err := kv.Delete(ctx, "k7"); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "k8"); err != nil {
		t.Fatal(err)
	}
	st, err := b.js.Stream(ctx, "KV_settings")
	if err != nil {
		t.Fatal(err)
	}
	last := st.CachedInfo().State.LastSeq
	want["k7"], want["k8"] = last-1, last // the delete and purge markers
	got := map[string]keeper.Message{}
	err = b.a.LastBySubject(ctx, "KV_settings", "$KV.settings.>", func(m keeper.Message) error {
		key := strings.TrimPrefix(m.Subject, "$KV.settings.")
		if _, twice := got[key]; twice {
			t.Errorf("key %s was given twice", key)
		}
		got[key] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.EqualFunc(want, got, func(rev uint64, m keeper.Message) bool { return rev == m.Seq }) {
		t.Fatalf("got %d keys, want %d; k7 %+v k8 %+v", len(got), len(want), got["k7"], got["k8"])
	}
	if h := string(got["k7"].Header); h != "NATS/1.0\r\nKV-Operation: DEL\r\n\r\n" {
		t.Fatalf("k7's delete marker has the header block %q", h)
	}
	if h := string(got["k8"].Header); !strings.Contains(h, "KV-Operation: PURGE\r\n") || !strings.Contains(h, "Nats-Rollup: sub\r\n") {
		t.Fatalf("k8's purge marker has the header block %q", h)
	}
	if m := got["k50"]; string(m.Data) != "v250" || m.Header != nil || m.Time == 0 {
		t.Fatalf("k50 is %+v", m)
	}
	// A filter of one key, and one nothing matches.
	var one []keeper.Message
	if err := b.a.LastBySubject(ctx, "KV_settings", "$KV.settings.k50", func(m keeper.Message) error { one = append(one, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(one) != 1 || one[0].Seq != want["k50"] {
		t.Fatalf("the last of k50 alone is %+v", one)
	}
	err = b.a.LastBySubject(ctx, "KV_settings", "$KV.settings.none.>", func(m keeper.Message) error { return fmt.Errorf("got %s", m.Subject) })
	if err != nil {
		t.Fatalf("a filter nothing matches: %v", err)
	}
	if err := b.a.LastBySubject(ctx, "KV_settings", "$KV.>.x", nil); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("a filter with > inside gave %v", err)
	}
}

func TestLastBySubjectGivesObjectMetas(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	obs, err := b.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "files"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a.txt", "b.txt", "a.txt"} {
		if _, err := obs.PutBytes(ctx, name, bytes.Repeat([]byte(name), 100_000)); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	err = b.a.LastBySubject(ctx, "OBJ_files", "$O.files.M.>", func(m keeper.Message) error {
		var meta struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(m.Data, &meta); err != nil {
			return err
		}
		if string(m.Header) != "NATS/1.0\r\nNats-Rollup: sub\r\n\r\n" {
			return fmt.Errorf("meta of %s has the header block %q", meta.Name, m.Header)
		}
		names = append(names, meta.Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a.txt", "b.txt"}) {
		t.Fatalf("object metas %v", names)
	}
}

func TestStreamDetailAndUpdateStream(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	s := ordersStream(t, b.js, "ORDERS")
	publishMix(t, b.js, 50)
	for _, seq := range []uint64{1, 10, 11, 30} { // 1 moves the first sequence: not a deleted one
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	d, err := b.a.StreamDetail(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	info := s.CachedInfo()
	if d.Name != "ORDERS" || d.FirstSeq != 2 || d.LastSeq != 50 || d.Messages != 46 || !slices.Equal(d.Subjects, []string{"orders.>"}) {
		t.Fatalf("detail %+v", d.StreamInfo)
	}
	if !slices.Equal(d.Deleted, []uint64{10, 11, 30}) {
		t.Fatalf("deleted %v, want [10 11 30]", d.Deleted)
	}
	if d.Created != info.Created.UnixNano() {
		t.Fatalf("created %d, the stream says %d", d.Created, info.Created.UnixNano())
	}
	var cfg map[string]any
	if err := json.Unmarshal(d.Config, &cfg); err != nil || cfg["name"] != "ORDERS" || cfg["storage"] != "file" || cfg["max_msgs"] != -1.0 {
		t.Fatalf("config %s (%v)", d.Config, err)
	}
	// Back through UpdateStream with one field changed.
	cfg["max_msgs"] = 1000
	raw, _ := json.Marshal(cfg)
	if err := b.a.UpdateStream(ctx, raw); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.Config.MaxMsgs != 1000 {
		t.Fatalf("after the update max_msgs is %d (%v)", info.Config.MaxMsgs, err)
	}
	cfg["storage"] = "memory" // the server does not let an update change it
	raw, _ = json.Marshal(cfg)
	if err := b.a.UpdateStream(ctx, raw); !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "storage") {
		t.Fatalf("an update of the storage gave %v", err)
	}
	cfg["name"], cfg["storage"] = "GONE", "file"
	raw, _ = json.Marshal(cfg)
	if err := b.a.UpdateStream(ctx, raw); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("an update of a missing stream gave %v", err)
	}
	if err := b.a.UpdateStream(ctx, []byte(`{"subjects":["x"]}`)); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("a configuration without a name gave %v", err)
	}
	if _, err := b.a.StreamDetail(ctx, "GONE"); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("the detail of a missing stream gave %v", err)
	}
}

func TestDeleteMessagesTwice(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	s := ordersStream(t, b.js, "ORDERS")
	want := publishMix(t, b.js, 3000)
	var seqs []uint64
	for seq := uint64(2); seq <= 3000; seq += 2 {
		seqs = append(seqs, seq)
	}
	if err := b.a.DeleteMessages(ctx, "ORDERS", seqs); err != nil {
		t.Fatal(err)
	}
	// Again, as after a crash, with one past the end.
	if err := b.a.DeleteMessages(ctx, "ORDERS", append(seqs, 5000)); err != nil {
		t.Fatalf("deleting them again: %v", err)
	}
	d, err := b.a.StreamDetail(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	// The last sequence stays 3000, its message deleted.
	if d.Messages != 1500 || !slices.Equal(d.Deleted, seqs) || d.LastSeq != 3000 {
		t.Fatalf("after the deletes %d messages, last %d, %d deleted", d.Messages, d.LastSeq, len(d.Deleted))
	}
	var odd []sent
	for _, w := range want {
		if w.seq%2 == 1 {
			odd = append(odd, w)
		}
	}
	checkSame(t, s, readAll(t, b, "ORDERS", 0, 0), odd)
	if err := b.a.DeleteMessages(ctx, "GONE", []uint64{1}); !errors.Is(err, keeper.ErrNoStream) {
		t.Fatalf("deleting in a missing stream gave %v", err)
	}
}

func TestPublishReturnsTheStoredSequence(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	s := ordersStream(t, b.js, "ORDERS")
	publishMix(t, b.js, 3)
	hdr := []byte("NATS/1.0\r\nTrace-Id: 42\r\nTrace-Id: 43\r\n\r\n")
	seq, err := b.a.Publish(ctx, "orders.new", hdr, []byte("fresh"))
	if err != nil || seq != 4 {
		t.Fatalf("publish gave #%d, %v", seq, err)
	}
	seq, err = b.a.Publish(ctx, "orders.new", nil, []byte("plain"))
	if err != nil || seq != 5 {
		t.Fatalf("publish gave #%d, %v", seq, err)
	}
	got := readAll(t, b, "ORDERS", 4, 0)
	checkSame(t, s, got, []sent{{seq: 4, subject: "orders.new", headers: [][]byte{hdr}, data: []byte("fresh")},
		{seq: 5, subject: "orders.new", data: []byte("plain")}})
	if _, err := b.js.CreateStream(ctx, jetstream.StreamConfig{Name: "SMALL", Subjects: []string{"small"}, MaxMsgSize: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.a.Publish(ctx, "small", nil, []byte("more than ten bytes")); !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "maximum") {
		t.Fatalf("a message over the stream's size gave %v", err)
	}
	if _, err := b.a.Publish(ctx, "orders.x", []byte("not a header"), nil); !errors.Is(err, keeper.ErrBadRequest) {
		t.Fatalf("a header block that does not parse gave %v", err)
	}
	if _, err = b.a.Publish(ctx, "nobody.takes.it", nil, []byte("x")); !errors.Is(err, keeper.ErrNotFound) {
		t.Fatalf("a subject no stream takes gave %v", err)
	}
}

// TestLastBySubjectWhileAWriterRewrites: every key is given while a writer
// keeps rewriting keys, none older than it was when the read began, and
// the read ends.
func TestLastBySubjectWhileAWriterRewrites(t *testing.T) {
	b := newBus(t)
	ctx := testCtx(t)
	kv, err := b.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]uint64{}
	for i := range 200 {
		key := fmt.Sprintf("k%d", i)
		if before[key], err = kv.Put(ctx, key, []byte("first")); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var written atomic.Int64
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := kv.Put(ctx, fmt.Sprintf("k%d", i%250), []byte("again")); err != nil {
				t.Errorf("the writer: %v", err)
				return
			}
			written.Add(1)
		}
	})
	defer wg.Wait()
	defer close(stop)
	for written.Load() < 50 {
		time.Sleep(time.Millisecond)
	}
	last := map[string]uint64{}
	err = b.a.LastBySubject(ctx, "KV_busy", "$KV.busy.>", func(m keeper.Message) error {
		key := strings.TrimPrefix(m.Subject, "$KV.busy.")
		if m.Seq <= last[key] {
			return fmt.Errorf("key %s given at #%d after #%d", key, m.Seq, last[key])
		}
		last[key] = m.Seq
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for key, rev := range before {
		if last[key] < rev {
			t.Fatalf("key %s was given at #%d, it was at #%d before the read", key, last[key], rev)
		}
	}
}
