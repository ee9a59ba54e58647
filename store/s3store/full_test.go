package s3store

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/nats-keeper/nats-keeper/store"
)

// refusingProxy stands before a real S3 server and answers the write that
// refuse picks with 400 EntityTooLarge, as a store over its quota or its
// object limit does; everything else goes through. For injecting the
// refusal only.
func refusingProxy(t *testing.T, target string, refuse func(r *http.Request) bool) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if refuse(r) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>EntityTooLarge</Code>`+
				`<Message>Your proposed upload exceeds the maximum allowed size</Message></Error>`)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A part or a completion that the S3 store refuses for want of room fails
// the write with store.ErrFull: the upload is aborted (no unfinished upload
// and no kept part is left), nothing is visible under the key, and the
// object committed there before is intact.
func TestRefusedWriteLeavesNoOrphan(t *testing.T) {
	srv := startServer(t)
	direct := srv.open(t)
	earlier := random(t, 1<<20)
	const key = "points/m/l/f1-x/bus.tar"
	put(t, direct, key, earlier)
	cases := []struct {
		name   string
		refuse func(r *http.Request) bool
	}{
		{"first part", func(r *http.Request) bool { return r.URL.Query().Get("partNumber") == "1" }},
		{"mid-object", func(r *http.Request) bool { return r.URL.Query().Get("partNumber") == "2" }},
		{"completion", func(r *http.Request) bool {
			q := r.URL.Query()
			return r.Method == http.MethodPost && q.Has("uploadId")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var refused atomic.Int32
			cfg := srv.config(t)
			cfg.Endpoint = refusingProxy(t, srv.endpoint, func(r *http.Request) bool {
				if c.refuse(r) {
					refused.Add(1)
					return true
				}
				return false
			})
			s, err := Open(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			w, err := s.Create(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Abort()
			_, err = w.Write(random(t, 2*store.PartSize+4096))
			if err == nil {
				_, err = w.Commit(t.Context()) // a failed Commit aborts by itself
			} else {
				w.Abort() // as every writer's caller does after a failed Write
			}
			if !errors.Is(err, store.ErrFull) || refused.Load() == 0 {
				t.Fatalf("a write the store refused with EntityTooLarge: %v (refused %d request(s)), want store.ErrFull", err, refused.Load())
			}
			ups, err := direct.c.ListMultipartUploads(t.Context(), &s3.ListMultipartUploadsInput{Bucket: aws.String(srv.bucket)})
			if err != nil {
				t.Fatal(err)
			}
			if len(ups.Uploads) != 0 {
				t.Errorf("%d unfinished upload(s) left after the refusal", len(ups.Uploads))
			}
			all, err := direct.List(t.Context(), "")
			if err != nil || len(all) != 1 || all[0].Key != key {
				t.Errorf("objects after the refusal: %v (%v), want %s alone", all, err, key)
			}
			held, err := direct.c.ListObjectsV2(t.Context(), &s3.ListObjectsV2Input{Bucket: aws.String(srv.bucket)})
			if err != nil || len(held.Contents) != 1 {
				t.Errorf("the bucket holds %d object(s) after the refusal (%v), want the earlier one alone", len(held.Contents), err)
			}
			o, err := direct.Open(t.Context(), key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(io.NewSectionReader(o, 0, o.Size()))
			o.Close()
			if err != nil || !bytes.Equal(got, earlier) {
				t.Fatalf("the earlier object reads %d bytes (%v), want its %d", len(got), err, len(earlier))
			}
		})
	}
}
