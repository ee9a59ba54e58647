package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// readmePermissions returns the server configuration block of the README's
// Permissions section, so that this test checks exactly what it documents.
func readmePermissions(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Permissions")
	if i < 0 {
		t.Fatal("README.md has no Permissions section")
	}
	s = s[i:]
	start := strings.Index(s, "```conf\n")
	if start < 0 {
		t.Fatal("the Permissions section has no ```conf block")
	}
	s = s[start+len("```conf\n"):]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatal("the ```conf block does not end")
	}
	return s[:end]
}

// The README's keeper user can run every verb; its read-only user can list
// and verify, and the server refuses its changing verbs, which change nothing.
func TestReadmePermissions(t *testing.T) {
	conf := readmePermissions(t)
	// An admin for the test's own setup, beside the README's users.
	conf = strings.Replace(conf, "users = [", `users = [
    { user: "admin", password: "admin-secret" }`, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the README's configuration does not load: %v\n%s", err, conf)
	}
	base := natstest.Options(filepath.Join(dir, "store"))
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir = base.Host, base.Port, true, base.StoreDir
	opts.NoLog, opts.NoSigs, opts.ServerName = true, true, base.ServerName
	s := natstest.Start(t, opts)

	admin := natstest.Connect(t, s, nats.UserInfo("admin", "admin-secret"))
	keeperConn := natstest.Connect(t, s, nats.UserInfo("keeper", "keeper-secret"))
	denied := make(chan string, 10)
	viewer := natstest.Connect(t, s, nats.UserInfo("viewer", "viewer-secret"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				denied <- err.Error()
			}
		}))
	ctx := context.Background()

	svc, err := startKeeper(ctx, keeperConn, keeperSetup{Store: dirStore(t, filepath.Join(dir, "keeper"))}, quietLog())
	if err != nil {
		t.Fatalf("the keeper user cannot start the keeper: %v", err)
	}
	t.Cleanup(func() { _ = svc.Stop() })

	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := sample.Create(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	// The keeper user: every verb.
	kc := verbs.NewClient(admin, verbs.WithTimeout(time.Minute))
	req := kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "f", Caller: "admin"}
	if _, err := kc.SnapshotKept(ctx, req); err != nil {
		t.Fatalf("snapshot-kept as the keeper user: %v", err)
	}
	if _, err := kc.VerifyKept(ctx, req); err != nil {
		t.Fatalf("verify-kept as the keeper user: %v", err)
	}
	if err := sample.Change(ctx, js, "billing", "ledger"); err != nil {
		t.Fatal(err)
	}
	req.Why = "permissions test"
	rep, err := kc.RestoreKept(ctx, req)
	if err != nil {
		t.Fatalf("restore-kept as the keeper user: %v", err)
	}
	asideID := rep.Aside.ID

	// The read-only user.
	names := sample.NamesOf("billing", "ledger")
	before, err := sample.Dump(ctx, js, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	vc := verbs.NewClient(viewer, verbs.WithTimeout(time.Minute))
	list, err := vc.ListKept(ctx, kept.Request{})
	if err != nil || len(list.Points) != 1 || len(list.Asides) != 1 {
		t.Fatalf("list-kept as the viewer: %+v, %v", list, err)
	}
	if _, err := vc.VerifyKept(ctx, kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "f"}); err != nil {
		t.Fatalf("verify-kept as the viewer: %v", err)
	}
	// The restore's evidence was gathered with the keeper user's rights,
	// and the viewer may read it back.
	if ev, err := vc.ShowEvidence(ctx, kept.Request{From: asideID}); err != nil || ev.Evidence == nil || ev.Evidence.Verdict != kept.Pass {
		t.Fatalf("show-evidence as the viewer: %+v, %v", ev, err)
	}
	if d, err := vc.DiffKept(ctx, kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "f"}); err != nil || len(d.Streams) != 3 {
		t.Fatalf("diff-kept as the viewer: %+v, %v", d, err)
	}
	// The server refuses the changing verbs: the viewer's publish is a
	// permissions violation reported to its error handler, and the keeper
	// never counts the request.
	for _, verb := range []string{kept.VerbRestore, kept.VerbDiscard, kept.VerbSnapshot} {
		body := `{"module":"billing","local":"ledger","form":1,"fingerprint":"f","why":"not allowed"}`
		if verb == kept.VerbDiscard {
			body = `{"from":"` + asideID + `","why":"not allowed"}`
		}
		if err := viewer.PublishRequest(verbs.DefaultPrefix+"."+verb, viewer.NewRespInbox(), []byte(body)); err != nil {
			t.Fatal(err)
		}
		if err := viewer.Flush(); err != nil {
			t.Fatal(err)
		}
		select {
		case msg := <-denied:
			if !strings.Contains(msg, `"`+verbs.DefaultPrefix+"."+verb+`"`) {
				t.Errorf("%s: the violation names another subject: %s", verb, msg)
			}
		case <-time.After(time.Minute): // a guard against hanging, not a measurement
			t.Fatalf("%s as the viewer was not refused by the server", verb)
		}
	}
	stats, err := admin.Request("$SRV.STATS."+verbs.ServiceName, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var st micro.Stats
	if err := json.Unmarshal(stats.Data, &st); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{kept.VerbSnapshot: 1, kept.VerbRestore: 1, kept.VerbDiscard: 0}
	for _, ep := range st.Endpoints {
		if n, ok := want[ep.Name]; ok {
			delete(want, ep.Name)
			if ep.NumRequests != n {
				t.Errorf("%s reached the keeper %d times, want %d (the keeper user's only)", ep.Name, ep.NumRequests, n)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("the service's stats lack the endpoints %v", want)
	}
	after, err := sample.Dump(ctx, js, names.Streams()...)
	if err != nil {
		t.Fatal(err)
	}
	if d := sample.Diff(before, after); d != "" {
		t.Fatalf("the viewer's refused verbs changed the bus:\n%s", d)
	}
	list, err = kc.ListKept(ctx, kept.Request{})
	if err != nil || len(list.Points) != 1 || len(list.Asides) != 1 || list.Asides[0].ID != asideID {
		t.Fatalf("after the viewer's refused verbs: %+v, %v", list, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keeper", "aside", asideID, "bus.tar")); err != nil {
		t.Fatalf("the aside is gone: %v", err)
	}

	// The viewer reads the trail of acts back (nats-keeper acts), straight
	// from the acts stream, and may not write to it.
	var verbsRead []string
	actsCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := jsbus.ReadActs(actsCtx, viewer, verbs.DefaultPrefix, time.Time{}, func(sa jsbus.StoredAct) error {
		if sa.Bad != nil {
			t.Errorf("act #%d: %v", sa.Seq, sa.Bad)
		}
		verbsRead = append(verbsRead, sa.Act.Verb)
		return nil
	}); err != nil {
		t.Fatalf("the viewer reading the acts: %v", err)
	}
	if !slices.Contains(verbsRead, kept.VerbSnapshot) || !slices.Contains(verbsRead, kept.VerbRestore) {
		t.Errorf("the viewer read the acts %v, want the snapshot's and the restore's among them", verbsRead)
	}
	if err := viewer.Publish(verbs.DefaultPrefix+".acts.discard-aside", []byte(`{"verb":"discard-aside"}`)); err != nil {
		t.Fatal(err)
	}
	if err := viewer.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-denied:
		if !strings.Contains(msg, ".acts.discard-aside") {
			t.Errorf("a forged act: the violation names another subject: %s", msg)
		}
	case <-time.After(time.Minute): // a guard against hanging, not a measurement
		t.Fatal("the viewer could publish an act")
	}

	// The keeper user hears the advisories the census needs: a snapshot
	// after the first lists no stream (were they refused, every census
	// would list every stream).
	lists, err := admin.SubscribeSync("$JS.API.STREAM.LIST")
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.SnapshotKept(ctx, kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "g", Caller: "admin"}); err != nil {
		t.Fatalf("a second snapshot-kept as the keeper user: %v", err)
	}
	if err := admin.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := lists.Pending(); n != 0 {
		t.Errorf("a snapshot by the README's keeper user listed every stream (%d pages): it cannot hear the census's advisories", n)
	}
}
