package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/s3test"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// TestStoreNATSVault keeps the points of a keeper on one nats-server in an
// object store on a second one (the vault): the whole round trip works, the
// vault holds the objects and the keeper's directory none, and a keeper
// started again with its directory gone restores the point from the vault.
func TestStoreNATSVault(t *testing.T) {
	tmp := t.TempDir()
	bin := tools.NatsServer(t)
	bus := startNatsServer(t, bin, filepath.Join(tmp, "bus"))
	vault := startNatsServer(t, bin, filepath.Join(tmp, "vault"))
	vjs, err := jetstream.New(connect(t, vault.url()))
	if err != nil {
		t.Fatal(err)
	}
	storeRoundTrip(t, tmp, bus, []string{"--store", vault.url() + "/keeper-points"}, nil, func(t *testing.T) []string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		obs, err := vjs.ObjectStore(ctx, "keeper-points")
		if err != nil {
			t.Fatalf("the vault holds no object store keeper-points: %v", err)
		}
		infos, err := obs.List(ctx)
		if err != nil {
			t.Fatalf("list the vault's keeper-points: %v", err)
		}
		var keys []string
		for _, i := range infos {
			if !strings.HasPrefix(i.Name, "/") { // the parts' hidden names
				keys = append(keys, i.Name)
			}
		}
		return keys
	})
}

// TestStoreS3 is TestStoreNATSVault with the points in S3 (versitygw), the
// credentials in the keeper's AWS environment.
func TestStoreS3(t *testing.T) {
	tmp := t.TempDir()
	bus := startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "bus"))
	s := startS3(t, "keeper-points")
	storeRoundTrip(t, tmp, bus, s.args("s3://keeper-points/e2e"), s.env(), func(t *testing.T) []string {
		return s.keys(t, "keeper-points", "e2e/")
	})
}

// storeRoundTrip runs a keeper on bus with the store that args name:
// snapshot-kept, verify-kept, list-kept, restore-kept of changed data; the
// store holds the point and the aside (keys lists it) and the keeper's
// directory nothing of them. Then the keeper is stopped, its directory
// removed, and a keeper started again restores the point once more; a
// second point is taken, and prune-kept removes the first from the store.
func storeRoundTrip(t *testing.T, tmp string, bus *natsServer, args, env []string, keys func(*testing.T) []string) {
	t.Helper()
	const module, local = "vaulted", "ledger"
	nc := connect(t, bus.url())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sample.Create(ctx, js, module, local); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tmp, "keeper")
	k := startKeeperArgs(t, bus.url(), dir, tmp, args, env...)
	waitKeepers(t, nc, 1, k)
	req := map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "one", "caller": "e2e"}
	mustCall(t, nc, "snapshot-kept", req)
	point := dumpState(t, js, module, local)
	mustVerify(t, nc, "", req)
	if got := pointFingerprints(mustCall(t, nc, "list-kept", map[string]any{"module": module})); !slices.Equal(got, []string{"one"}) {
		t.Errorf("list-kept lists the points %v; want [one]", got)
	}
	restore := func(when string) {
		t.Helper()
		if err := sample.Change(ctx, js, module, local); err != nil {
			t.Fatal(err)
		}
		mustCall(t, nc, "restore-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "one",
			"why": "e2e " + when, "caller": "e2e", "method": "full"}) // a whole aside: the prune below removes the point
		if d := point.diff(dumpState(t, js, module, local)); d != "" {
			t.Errorf("%s, the kept data differs from the point:\n%s", when, d)
		}
	}
	restore("after restore-kept")

	got := keys(t)
	t.Logf("the store holds %v", got)
	rel := "points/" + module + "/" + local + "/f1-one/"
	for _, want := range []string{rel + "point.json", rel + "bus.tar"} {
		if !slices.Contains(got, want) {
			t.Errorf("the store does not hold %s; it holds %v", want, got)
		}
	}
	asides := withPrefix(got, "aside/")
	if n := len(asides); n != 4 { // aside.json, bus.tar, and the restore's evidence.json and summary.md
		t.Errorf("the store holds %d aside object(s); want the restore's aside.json, bus.tar, evidence.json and summary.md: %v", n, got)
	}
	for _, name := range []string{"/evidence.json", "/summary.md"} {
		if !slices.ContainsFunc(asides, func(k string) bool { return strings.HasSuffix(k, name) }) {
			t.Errorf("the store holds no %s beside the aside: %v", name, got)
		}
	}
	if files := keptFiles(t, dir); len(files) > 0 {
		t.Errorf("the keeper's directory holds point or aside files, which belong in the store: %v", files)
	}

	k.p.stop(t, syscall.SIGTERM, time.Minute)
	if k.p.err != nil {
		t.Fatalf("the keeper did not stop cleanly: %v\n%s", k.p.err, tail(k.p.log.String()))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	k = startKeeperArgs(t, bus.url(), dir, tmp, args, env...)
	waitKeepers(t, nc, 1, k)
	restore("after a keeper started again without its directory restored it")
	mustVerify(t, nc, "", req)

	// prune-kept removes the older point from the store, and no aside.
	mustCall(t, nc, "snapshot-kept", map[string]any{"module": module, "local": local, "form": 1, "fingerprint": "two", "caller": "e2e"})
	asidesBefore := withPrefix(keys(t), "aside/")
	pruned := mustCall(t, nc, "prune-kept", map[string]any{"module": module, "local": local, "policy": map[string]any{"keep-last": 1}, "caller": "e2e", "why": "e2e store prune"})
	if !strings.Contains(pruned.Said, "1 point(s) kept, 1 removed.") {
		t.Errorf("prune-kept keep-last 1 on the store: %s", pruned.Said)
	}
	got = keys(t)
	if left := withPrefix(got, rel); len(left) > 0 {
		t.Errorf("the pruned point f1-one left %v in the store", left)
	}
	if two := "points/" + module + "/" + local + "/f1-two/"; !slices.Contains(got, two+"point.json") || !slices.Contains(got, two+"bus.tar") {
		t.Errorf("the kept point f1-two is not whole in the store: %v", got)
	}
	if after := withPrefix(got, "aside/"); !slices.Equal(after, asidesBefore) || len(after) != 8 {
		t.Errorf("the asides in the store before the prune were %v, after it %v; want the two asides untouched", asidesBefore, after)
	}
	if got := pointFingerprints(mustCall(t, nc, "list-kept", map[string]any{"module": module})); !slices.Equal(got, []string{"two"}) {
		t.Errorf("after the prune list-kept lists the points %v; want [two]", got)
	}
}

// withPrefix are the keys that begin with prefix.
func withPrefix(keys []string, prefix string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// keptFiles are the point, aside and archive files under dir (none when dir
// is missing).
func keptFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == dir {
			return filepath.SkipAll
		}
		if err != nil {
			return err
		}
		if n := d.Name(); n == "point.json" || n == "aside.json" || n == "bus.tar" || (d.IsDir() && (n == "points" || n == "aside")) {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// mustVerify calls verify-kept on prefix ("" is the default) and wants a
// report that says the point verifies.
func mustVerify(t *testing.T, nc *nats.Conn, prefix string, req map[string]any) {
	t.Helper()
	r := callJSON(t, nc, prefix, "verify-kept", req)
	if rep, _ := r.Body["report"].(map[string]any); r.Code != 200 || rep == nil || rep["bytes"] == nil {
		t.Errorf("verify-kept of %v on %q: %s", req["fingerprint"], prefix, r)
	}
}

// callJSON sends req to the verb on prefix ("" is the default).
func callJSON(t *testing.T, nc *nats.Conn, prefix, verb string, req any) reply {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return callAt(context.Background(), nc, cmp.Or(prefix, verbs.DefaultPrefix), verb, body, 5*time.Minute)
}

// s3Server is a versitygw with buckets made and the root user's
// credentials.
type s3Server struct{ endpoint, access, secret string }

func startS3(t *testing.T, buckets ...string) s3Server {
	t.Helper()
	var s s3Server
	s.endpoint, s.access, s.secret = s3test.Start(t)
	for _, b := range buckets {
		s3test.MakeBucket(t, s.endpoint, s.access, s.secret, b)
	}
	return s
}

// args are the command line arguments of a store at u on this server.
func (s s3Server) args(u string) []string {
	return []string{"--store", u, "--s3-endpoint", s.endpoint, "--s3-path-style"}
}

// env is the AWS environment of a process that reaches the server.
func (s s3Server) env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.access, "AWS_SECRET_ACCESS_KEY=" + s.secret, "AWS_REGION=us-east-1"}
}

// objects reads every object of bucket under prefix, by key.
func (s s3Server) objects(t *testing.T, bucket, prefix string) map[string][]byte {
	t.Helper()
	c := s.client()
	out := map[string][]byte{}
	for _, k := range s.keys(t, bucket, prefix) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		o, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(prefix + k)})
		if err != nil {
			cancel()
			t.Fatalf("get s3://%s/%s%s: %v", bucket, prefix, k, err)
		}
		b, err := io.ReadAll(o.Body)
		o.Body.Close()
		cancel()
		if err != nil {
			t.Fatalf("read s3://%s/%s%s: %v", bucket, prefix, k, err)
		}
		out[k] = b
	}
	return out
}

// client is an S3 client of the server.
func (s s3Server) client() *s3.Client {
	return s3.New(s3.Options{BaseEndpoint: aws.String(s.endpoint), Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(s.access, s.secret, "")})
}

// keys lists the objects of bucket under prefix, the prefix cut off, sorted.
func (s s3Server) keys(t *testing.T, bucket, prefix string) []string {
	t.Helper()
	c := s.client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list s3://%s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			out = append(out, strings.TrimPrefix(aws.ToString(o.Key), prefix))
		}
	}
	sort.Strings(out)
	return out
}
