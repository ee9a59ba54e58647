package s3store

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nats-keeper/nats-keeper/internal/s3test"
	"github.com/nats-keeper/nats-keeper/store"
)

// server is one versitygw with a bucket, and the credentials in the
// environment, where the SDK's default chain finds them.
type server struct {
	endpoint, access, secret, bucket string
}

func startServer(t *testing.T) server {
	t.Helper()
	srv := server{bucket: "keeper-test"}
	srv.endpoint, srv.access, srv.secret = s3test.Start(t)
	s3test.MakeBucket(t, srv.endpoint, srv.access, srv.secret, srv.bucket)
	credentials(t, srv.access, srv.secret)
	return srv
}

// credentials puts access and secret in the environment and keeps every
// other source of the SDK's default chain (files, profiles, instance
// metadata) out of the test.
func credentials(t *testing.T, access, secret string) {
	t.Setenv("AWS_ACCESS_KEY_ID", access)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

func (srv server) config(t *testing.T) Config {
	return Config{
		Bucket:    srv.bucket,
		Prefix:    "keeper/points",
		Endpoint:  srv.endpoint,
		PathStyle: true,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

func (srv server) open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.Context(), srv.config(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func random(t *testing.T, n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func put(t *testing.T, s store.Store, key string, data []byte) store.Info {
	t.Helper()
	w, err := s.Create(t.Context(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	info, err := w.Commit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func sum(data []byte) string {
	c := store.NewChecksum()
	c.Write(data)
	return c.Sum()
}

func TestRoundTrip(t *testing.T) {
	s := startServer(t).open(t)
	for _, size := range []int{0, 1, 1000, store.PartSize - 1, store.PartSize, store.PartSize + 1, 2*store.PartSize + 777} {
		data := random(t, size)
		key := "p/size-" + strings.Repeat("x", size%7) + "-" + time.Now().Format("150405.000000")
		info := put(t, s, key, data)
		if info.Size != int64(size) || info.Sum != sum(data) || info.Key != key {
			t.Fatalf("size %d: Commit gave %+v, want sum %s", size, info, sum(data))
		}
		st, err := s.Stat(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Sum != info.Sum || st.Size != info.Size || !st.Modified.Equal(info.Modified) {
			t.Fatalf("size %d: Stat gave %+v, Commit %+v", size, st, info)
		}
		o, err := s.Open(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: ReadAt gave %d bytes, %v", size, len(got), err)
		}
		for _, r := range [][2]int64{{0, 0}, {0, int64(size)}, {int64(size / 3), int64(size / 2)}} {
			rc, err := o.Reader(t.Context(), r[0], r[1])
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, data[r[0]:r[0]+r[1]]) {
				t.Fatalf("size %d: Reader(%d, %d) gave %d bytes, %v", size, r[0], r[1], len(got), err)
			}
		}
		if _, err := o.Reader(t.Context(), 1, int64(size)); err == nil {
			t.Fatalf("size %d: Reader past the end succeeded", size)
		}
		o.Close()
	}
}

func TestReadAtKeepsABlock(t *testing.T) {
	s := startServer(t).open(t)
	data := random(t, 3*block+100)
	put(t, s, "tar", data)
	o, err := s.Open(t.Context(), "tar")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	gets := 0
	for off := int64(0); off+512 <= int64(len(data)); off += 512 {
		p := make([]byte, 512)
		ob := o.(*object)
		before := ob.blkOff
		if _, err := o.ReadAt(p, off); err != nil {
			t.Fatal(err)
		}
		if ob.blkOff != before || off == 0 {
			gets++
		}
		if !bytes.Equal(p, data[off:off+512]) {
			t.Fatalf("ReadAt at %d differs", off)
		}
	}
	if gets > 4 {
		t.Fatalf("scanning %d bytes in 512-byte reads took %d GETs, want at most 4", len(data), gets)
	}
	p := make([]byte, 200)
	n, err := o.ReadAt(p, int64(len(data))-100)
	if n != 100 || err != io.EOF || !bytes.Equal(p[:n], data[len(data)-100:]) {
		t.Fatalf("ReadAt over the end gave %d, %v", n, err)
	}
}

func TestReplacedWhileOpen(t *testing.T) {
	s := startServer(t).open(t)
	put(t, s, "a", random(t, 5000))
	o, err := s.Open(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	put(t, s, "a", random(t, 5000))
	_, err = o.ReadAt(make([]byte, 10), 0)
	if err == nil {
		t.Fatal("a read of a replaced object succeeded")
	}
	t.Log(err)
}

func TestListDeleteAbort(t *testing.T) {
	srv := startServer(t)
	s := srv.open(t)
	for _, k := range []string{"b/2", "a/1", "b/1", "c"} {
		put(t, s, k, []byte(k))
	}
	w, _ := s.Create(t.Context(), "b/3")
	w.Write(random(t, store.PartSize+10))
	w.Abort()
	if _, err := s.Stat(t.Context(), "b/3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Stat of an aborted object: %v, want ErrNotFound", err)
	}
	list, err := s.List(t.Context(), "b/")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Key != "b/1" || list[1].Key != "b/2" || list[0].Size != 3 {
		t.Fatalf("List(b/) = %+v", list)
	}
	if err := s.Delete(t.Context(), "b/1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), "b/1"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	if _, err := s.Open(t.Context(), "b/1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Open of a deleted key: %v, want ErrNotFound", err)
	}
	all, err := s.List(t.Context(), "")
	if err != nil || len(all) != 3 {
		t.Fatalf("List() = %+v, %v", all, err)
	}
	if n := uploads(t, s); n != 0 {
		t.Fatalf("%d uploads left after Abort", n)
	}
}

func uploads(t *testing.T, s *Store) int {
	t.Helper()
	out, err := s.c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(s.bucket)})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

func TestSweep(t *testing.T) {
	s := startServer(t).open(t)
	k := &sink{s: s, key: "left", full: s.full("left")}
	data := random(t, store.PartSize)
	if err := k.Part(t.Context(), 1, store.Blocks{data}, sha256.Sum256(data)); err != nil {
		t.Fatal(err)
	}
	put(t, s, "kept", data)
	if err := s.Sweep(t.Context(), time.Hour); err != nil || uploads(t, s) != 1 {
		t.Fatalf("Sweep(1h) of a new upload: %v, %d uploads left, want 1", err, uploads(t, s))
	}
	time.Sleep(1100 * time.Millisecond) // Initiated has whole seconds
	if err := s.Sweep(t.Context(), time.Second); err != nil || uploads(t, s) != 0 {
		t.Fatalf("Sweep(1s): %v, %d uploads left, want 0", err, uploads(t, s))
	}
	if _, err := s.Stat(t.Context(), "kept"); err != nil {
		t.Fatalf("Sweep touched a committed object: %v", err)
	}
}

func TestCopy(t *testing.T) {
	s := startServer(t).open(t)
	small, big := random(t, 4000), random(t, 2*store.PartSize+3)
	put(t, s, "small", small)
	put(t, s, "big", big)
	check := func(src, dst string, data []byte) {
		t.Helper()
		info, err := s.Copy(t.Context(), src, dst)
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Stat(t.Context(), dst)
		if err != nil || info.Sum != sum(data) || st.Sum != info.Sum || st.Size != int64(len(data)) {
			t.Fatalf("Copy(%s) gave %+v, Stat %+v, %v; want sum %s", src, info, st, err, sum(data))
		}
		o, _ := s.Open(t.Context(), dst)
		defer o.Close()
		got, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the copy of %s reads back wrong: %v", src, err)
		}
	}
	check("small", "copy/small", small)
	check("big", "copy/big", big)
	s.copyLimit, s.copyPart = store.PartSize, store.PartSize // UploadPartCopy
	check("big", "copy/big-parts", big)
	if _, err := s.Copy(t.Context(), "missing", "x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Copy of a missing key: %v, want ErrNotFound", err)
	}
}

// TestHeldHeader patches a header written before its entry, as an archive
// does, across a multipart upload: the held part goes up last.
func TestHeldHeader(t *testing.T) {
	s := startServer(t).open(t)
	data := random(t, 3*store.PartSize+10)
	w, err := s.Create(t.Context(), "held")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Abort()
	w.Write(data[:100])
	w.Hold(100, 512)
	w.Write(make([]byte, 512))
	w.Write(data[612 : store.PartSize+50])
	w.WriteAt(data[100:612], 100)
	w.Release()
	w.Write(data[store.PartSize+50:])
	info, err := w.Commit(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stat(t.Context(), "held")
	if err != nil || info.Sum != sum(data) || st.Sum != info.Sum {
		t.Fatalf("Commit %+v, Stat %+v, %v; want sum %s", info, st, err, sum(data))
	}
	o, _ := s.Open(t.Context(), "held")
	defer o.Close()
	got, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the object reads back wrong: %v", err)
	}
	if n := heldObjects(t, s); n != 0 {
		t.Errorf("%d kept parts are left under %s after Commit", n, heldDir)
	}
}

// heldObjects counts the objects under heldDir.
func heldObjects(t *testing.T, s *Store) int {
	t.Helper()
	out, err := s.c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.full(heldDir) + "/")})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Contents)
}

// The part a hold overlaps is kept as an object under heldDir while the hold
// lasts, never listed; Abort removes it, and Sweep removes one a crash left.
func TestHeldPartKeptAside(t *testing.T) {
	s := startServer(t).open(t)
	for _, crash := range []bool{false, true} {
		w, err := s.Create(t.Context(), "points/held/bus.tar")
		if err != nil {
			t.Fatal(err)
		}
		w.Hold(0, 512)
		w.Write(random(t, store.PartSize+100))
		w.Write(random(t, store.PartSize)) // part 1 is kept once part 2 began storing
		if n := heldObjects(t, s); n != 1 {
			t.Fatalf("%d kept parts during the hold, want 1", n)
		}
		if infos, err := s.List(t.Context(), ""); err != nil || len(infos) != 0 {
			t.Errorf("List during the hold: %v, %v; want nothing", infos, err)
		}
		if !crash {
			w.Abort()
			if n := heldObjects(t, s); n != 0 {
				t.Errorf("%d kept parts after Abort, want 0", n)
			}
			continue
		}
		// A crash: the writer is never ended.
		time.Sleep(1100 * time.Millisecond)
		if err := s.Sweep(t.Context(), time.Second); err != nil {
			t.Fatal(err)
		}
		if n := heldObjects(t, s); n != 0 {
			t.Errorf("%d kept parts after Sweep(1s), want 0", n)
		}
		w.Abort()
	}
}
