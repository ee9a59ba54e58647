package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/internal/tools"
)

// bigBytes is the least payload the big kept data holds.
const bigBytes = 200 * mib

// bigEnv is one nats-server process with a kept data of at least 200 MiB
// and a restore point of it, shared by the crash and restart tests.
type bigEnv struct {
	srv           *natsServer
	nc            *nats.Conn
	js            jetstream.JetStream
	module, local string
	dir, home     string
	point         state // the kept data as the restore point holds it
	order         struct{ remove, restore []string }
}

func (e *bigEnv) req(extra map[string]any) map[string]any {
	r := map[string]any{"module": e.module, "local": e.local, "caller": "e2e"}
	for k, v := range extra {
		r[k] = v
	}
	return r
}

func (e *bigEnv) restoreBody(why string) []byte {
	// The full method, whose every step these tests stop at (auto would roll
	// the plain stream, appended to, back by delta: deltakill_test.go).
	b, _ := json.Marshal(e.req(map[string]any{"form": 1, "fingerprint": "before", "why": why, "method": "full"}))
	return b
}

// TestBigData makes one kept data of more than 200 MiB and a restore point of
// it, then: kills the keeper (SIGKILL, by its own step hook) at every step
// of a restore with live data, lets a module write into the kept data while
// the keeper is dead, and checks what a fresh keeper leaves (the writes end
// up live or in an aside); restarts the nats-server
// process in the middle of a snapshot and of a restore.
func TestBigData(t *testing.T) {
	e := &bigEnv{module: "crash", local: "big"}
	tmp := t.TempDir()
	e.dir, e.home = filepath.Join(tmp, "keeper"), tmp
	e.srv = startNatsServer(t, tools.NatsServer(t), filepath.Join(tmp, "store"))
	e.nc = connect(t, e.srv.url())
	var err error
	if e.js, err = jetstream.New(e.nc, jetstream.WithPublishAsyncMaxPending(512)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if err := sample.Create(ctx, e.js, e.module, e.local); err != nil {
		t.Fatal(err)
	}
	n := fillBulk(t, e.js, e.module, e.local, bigBytes, 1)
	t.Logf("filled %d random messages (≥ %d MiB) in %s", n, bigBytes/mib, time.Since(start).Round(time.Millisecond))

	k := startKeeper(t, e.srv.url(), e.dir, e.home)
	waitKeepers(t, e.nc, 1, k)
	start = time.Now()
	mustCall(t, e.nc, "snapshot-kept", e.req(map[string]any{"form": 1, "fingerprint": "before"}))
	t.Logf("restore point taken in %s", time.Since(start).Round(time.Millisecond))
	e.point = dumpState(t, e.js, e.module, e.local)
	if got := e.point.bytesOf(); got < bigBytes {
		t.Fatalf("the kept data holds %d bytes, less than %d", got, bigBytes)
	}
	verifyArchive(t, filepath.Join(e.dir, "points", e.module, e.local, "f1-before"))

	// The order of removal and restore, from a dry run.
	dry := mustCall(t, e.nc, "restore-kept", e.req(map[string]any{"form": 1, "fingerprint": "before", "why": "plan", "dry-run": true, "method": "full"}))
	plan, _ := dry.Body["plan"].(map[string]any)
	e.order.remove = append(e.order.remove, asStrings(plan["remove"])...)
	e.order.restore = append(e.order.restore, asStrings(plan["restore"])...)
	if len(e.order.remove) != 3 || len(e.order.restore) != 3 {
		t.Fatalf("the dry run plans to remove %v and restore %v; want the 3 streams of the kept data each", e.order.remove, e.order.restore)
	}
	k.p.stop(t, syscall.SIGTERM, time.Minute)

	steps := []string{
		"journal-written",
		"remove:" + e.order.remove[0],
		"removed:" + e.order.remove[0],
		"remove:" + e.order.remove[len(e.order.remove)-1],
		"removed:" + e.order.remove[len(e.order.remove)-1],
		"restored:" + e.order.restore[0],
		"restored:" + e.order.restore[len(e.order.restore)-1],
		"positions-set",
	}
	for _, step := range steps {
		t.Run("crash at "+step, func(t *testing.T) { e.crashAt(t, step) })
	}
	for _, s := range []string{e.order.remove[0], e.order.remove[len(e.order.remove)-1]} {
		t.Run("connection drop at the delete of "+s, func(t *testing.T) { e.dropAt(t, "$JS.API.STREAM.DELETE."+s) })
	}
	t.Run("nats-server restart mid-snapshot", e.serverRestartMidSnapshot)
	t.Run("nats-server restart mid-restore", e.serverRestartMidRestore)
}

func asStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// change changes the kept data and returns it as it is then.
func (e *bigEnv) change(t *testing.T) state {
	t.Helper()
	if err := sample.Change(context.Background(), e.js, e.module, e.local); err != nil {
		t.Fatal(err)
	}
	live := dumpState(t, e.js, e.module, e.local)
	if live.diff(e.point) == "" {
		t.Fatal("the change left the kept data as the restore point holds it")
	}
	return live
}

// crashAt runs restore-kept on a keeper that kills itself at step, lets a
// module write into the kept data's plain stream, starts a keeper again
// without the hook, and checks the promise.
func (e *bigEnv) crashAt(t *testing.T, step string) {
	e.ensureWhole(t)
	live := e.change(t)
	before := asides(t, e.dir)

	k := startKeeper(t, e.srv.url(), e.dir, e.home, "NATS_KEEPER_CRASH_AT="+step)
	waitKeepers(t, e.nc, 1, k)
	ctx, cancel := context.WithCancel(context.Background())
	replied := make(chan reply, 1)
	go func() {
		replied <- call(ctx, e.nc, "restore-kept", e.restoreBody("crash test at "+step), 10*time.Minute)
	}()
	select {
	case <-k.p.exited:
	case r := <-replied:
		t.Fatalf("restore-kept replied %s before the keeper killed itself at %s\n%s", r, step, tail(k.p.log.String()))
	case <-time.After(10 * time.Minute):
		t.Fatalf("the keeper did not kill itself at %s within 10 minutes\n%s", step, tail(k.p.log.String()))
	}
	cancel()
	if r := <-replied; r.Err == nil {
		t.Errorf("restore-kept replied %s although the keeper was killed at %s", r, step)
	}
	var ee *exec.ExitError
	if !errors.As(k.p.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the keeper ended with %v, not SIGKILL at %s\n%s", k.p.err, step, tail(k.p.log.String()))
	}
	if !strings.Contains(k.p.log.String(), `"step":"`+step+`"`) {
		t.Fatalf("the keeper's log does not show it stopping at %s\n%s", step, tail(k.p.log.String()))
	}

	// While the keeper is dead, the module writes into the kept data's
	// plain stream, making it again if it is missing.
	w := writeAsModule(t, e.js, e.module, e.local, step)

	start := time.Now()
	k = startKeeper(t, e.srv.url(), e.dir, e.home)
	waitKeepers(t, e.nc, 1, k)
	if left := waitNoStale(t, e.js, e.dir, 75*time.Second); len(left) > 0 {
		t.Errorf("after recovery these remain (leases, journals, .partial): %v", left)
	}
	t.Logf("the keeper started again and recovered in %s", time.Since(start).Round(time.Millisecond))

	// The kept data is the live data or the restore point (the module's
	// writes then are in an aside), or the restore point with the module's
	// writes after it (recovery keeps a stream the restore had finished).
	got := dumpState(t, e.js, e.module, e.local)
	const withWrites = "the restore point with the module's writes"
	outcome, diffs := match(got, map[string]state{"the live data before the restore": live, "the restore point": e.point})
	if outcome == "" {
		if stripped, ok := w.strip(got); !ok {
			diffs += fmt.Sprintf("\nagainst %s: the module's writes are not the last messages of %s", withWrites, w.stream)
		} else if d := e.point.diff(stripped); d != "" {
			diffs += fmt.Sprintf("\nagainst %s (the writes taken out):\n%s", withWrites, d)
		} else {
			outcome = withWrites
		}
	}
	if outcome == "" {
		t.Errorf("the kept data on the bus is none of the known states — bytes were lost or mixed:\n%s", clip(diffs))
	}
	liveWrites := w.liveIn(got)
	t.Logf("crash at %s: the kept data is %s; %d of the module's %d writes are live (the module made %s again: %v)",
		step, outcome, len(liveWrites), writeCount, w.stream, w.made)

	// The asides: exactly one new of reason restore, complete, verifying,
	// holding the live data as it was; at most one new of reason recovery,
	// complete, verifying, holding only the plain stream with the module's
	// writes.
	var restoreAsides, recoveryAsides []string
	for _, id := range asides(t, e.dir) {
		if contains(before, id) {
			continue
		}
		adir := filepath.Join(e.dir, "aside", id)
		verifyArchive(t, adir)
		switch r := asideReason(t, e.dir, id); r {
		case "restore":
			restoreAsides = append(restoreAsides, id)
		case "recovery":
			recoveryAsides = append(recoveryAsides, id)
		default:
			t.Errorf("a new aside %s after a crash at %s has reason %q, neither restore nor recovery", id, step, r)
		}
	}
	if len(restoreAsides) != 1 || len(recoveryAsides) > 1 {
		t.Fatalf("want exactly one new aside of reason restore and at most one of reason recovery after a crash at %s, found %v and %v",
			step, restoreAsides, recoveryAsides)
	}
	adir := filepath.Join(e.dir, "aside", restoreAsides[0])
	if got := archiveStates(t, filepath.Join(adir, "bus.tar")); !sameStates(got, live.streamStates()) {
		t.Errorf("the restore's aside's manifest %v does not hold the live data %v", got, live.streamStates())
	}

	// Each of the module's writes is live or in one of the new asides.
	found := map[int]string{}
	for _, i := range liveWrites {
		found[i] = "live"
	}
	for _, id := range recoveryAsides {
		rdir := filepath.Join(e.dir, "aside", id)
		// Besides the stream the module wrote into, a recovery aside may
		// hold a stream the stopped restore had restored whole without
		// journaling it (streams are restored two at once): then as the
		// point has it.
		pointStates := e.point.streamStates()
		for name, st := range archiveStates(t, filepath.Join(rdir, "bus.tar")) {
			if name != w.stream && st != pointStates[name] {
				t.Errorf("the recovery aside %s holds %s as %v; want only %s, the stream the module wrote into, and streams as the point has them (%v)",
					id, name, st, w.stream, pointStates[name])
			}
		}
		held, ok := w.archivedWrites(t, rdir)
		if !ok || len(held) != writeCount {
			t.Errorf("the recovery aside %s holds %d of the module's %d writes (holds %s: %v)", id, len(held), writeCount, w.stream, ok)
		}
		for _, i := range held {
			found[i] = "the recovery aside " + id
		}
	}
	if len(found) < writeCount {
		// Not where they belong; look in the restore's aside too.
		held, _ := w.archivedWrites(t, adir)
		for _, i := range held {
			found[i] = "the restore's aside " + restoreAsides[0]
		}
	}
	for i := range writeCount {
		if found[i] == "" {
			t.Errorf("the module's write %q (subject %s), made after the crash at %s, is neither live nor in a new aside: lost",
				w.payloads[i], w.subjects[i], step)
		}
	}
	t.Logf("the module's writes are in: %v", found)

	if step != "positions-set" {
		a, ok := lastAct(t, e.js, "restore-kept")
		if !ok || !strings.Contains(a.What, "interrupted") || (a.Outcome != "done" && a.Outcome != "rolled back") {
			t.Errorf("the last restore-kept act is not the recovery's: %+v", a)
		}
	}

	for _, id := range append(restoreAsides, recoveryAsides...) {
		mustCall(t, e.nc, "discard-aside", map[string]any{"from": id, "why": "crash test checked it", "caller": "e2e"})
	}
	k.p.stop(t, syscall.SIGTERM, 2*time.Minute)
	if k.p.err != nil {
		t.Errorf("nats-keeper serve after SIGTERM: %v\n%s", k.p.err, tail(k.p.log.String()))
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// clip keeps the first lines of a long difference.
func clip(s string) string {
	lines := strings.Split(s, "\n")
	var keep []string
	for _, l := range lines {
		if !strings.Contains(l, " msg 0") || len(keep) < 12 {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// longTail is the end of a keeper's log, long enough for a whole restore.
func longTail(s string) string {
	const n = 40000
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// waitFor polls cond every few milliseconds until it holds or limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// serverRestartMidSnapshot restarts the nats-server while a snapshot-kept
// streams the big data into its archive, not yet committed: the snapshot
// rides the restart out (its archive written again) or fails cleanly.
func (e *bigEnv) serverRestartMidSnapshot(t *testing.T) {
	e.ensureWhole(t)
	k := startKeeper(t, e.srv.url(), e.dir, e.home)
	waitKeepers(t, e.nc, 1, k)
	live := dumpState(t, e.js, e.module, e.local)
	pointDir := filepath.Join(e.dir, "points", e.module, e.local, "f2-midsnap")

	body, _ := json.Marshal(e.req(map[string]any{"form": 2, "fingerprint": "midsnap"}))
	replied := make(chan reply, 1)
	go func() { replied <- call(context.Background(), e.nc, "snapshot-kept", body, 10*time.Minute) }()
	if !waitFor(5*time.Minute, func() bool {
		tmps, _ := filepath.Glob(filepath.Join(pointDir, ".bus.tar.tmp*"))
		for _, p := range tmps {
			if fi, err := os.Stat(p); err == nil && fi.Size() > 20*mib {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no restore point's archive being written with 20 MiB appeared\n%s", tail(k.p.log.String()))
	}
	e.srv.restart(t)

	var r reply
	select {
	case r = <-replied:
	case <-time.After(5 * time.Minute):
		t.Fatalf("snapshot-kept did not answer within 5 minutes of the server restart\n%s", tail(k.p.log.String()))
	}
	t.Logf("snapshot-kept during the server restart: %s", r)
	// The keeper writes an archive whose connection dropped again from the
	// start (up to six tries): the snapshot either rides out the restart
	// and its point is whole, or fails saying so and leaves nothing.
	switch {
	case r.Err == nil && r.Code == 200:
		verifyArchive(t, pointDir)
		if v := call(context.Background(), e.nc, "verify-kept", body, 5*time.Minute); v.Code != 200 {
			t.Errorf("verify-kept of the point taken across the server restart: %s", v)
		}
		if _, err := os.Lstat(pointDir + ".partial"); err == nil {
			t.Errorf("%s.partial exists after the snapshot", pointDir)
		}
	case r.Err != nil || !strings.Contains(r.Said, "not taken"):
		t.Errorf("snapshot-kept across a server restart replied %s; want success, or a failure saying no restore point was taken", r)
	default:
		for _, p := range []string{pointDir, pointDir + ".partial"} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s exists after the failed snapshot", p)
			}
		}
	}
	if left := leftovers(t, e.dir); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}

	// The same keeper serves again.
	var again reply
	body, _ = json.Marshal(e.req(map[string]any{"form": 2, "fingerprint": "aftersnap"}))
	ok := waitFor(2*time.Minute, func() bool {
		again = call(context.Background(), e.nc, "snapshot-kept", body, 5*time.Minute)
		if again.Code == 200 {
			return true
		}
		time.Sleep(time.Second)
		return false
	})
	if !ok {
		t.Fatalf("the keeper did not take a restore point again after the server restart: %s\n%s", again, tail(k.p.log.String()))
	}
	if k.p.done() {
		t.Fatalf("the keeper exited: %v", k.p.err)
	}
	verifyArchive(t, filepath.Join(e.dir, "points", e.module, e.local, "f2-aftersnap"))
	v := call(context.Background(), e.nc, "verify-kept", body, 5*time.Minute)
	if v.Code != 200 {
		t.Errorf("verify-kept of the new point: %s", v)
	}
	if d := live.diff(dumpState(t, e.js, e.module, e.local)); d != "" {
		t.Errorf("the kept data changed across the snapshot and the server restart:\n%s", d)
	}
	k.p.stop(t, syscall.SIGTERM, 2*time.Minute)
}

// serverRestartMidRestore restarts the nats-server while restore-kept
// restores the big stream, then waits for the keeper to make the kept data
// whole without being restarted.
func (e *bigEnv) serverRestartMidRestore(t *testing.T) {
	e.ensureWhole(t)
	live := e.change(t)
	before := asides(t, e.dir)
	k := startKeeper(t, e.srv.url(), e.dir, e.home)
	waitKeepers(t, e.nc, 1, k)

	// The moment the last live stream is deleted, the restore of the point's
	// streams begins: the server is stopped right then. The deletion's
	// advisory alone is not enough to see that moment: nats-server 2.15.3
	// queues it on the stream's outbound queue and closes the stream's quit
	// channel right after (stream.stop in server/stream.go), and the
	// stream's loop, finding both ready, may return without sending it. So
	// the first restore request the keeper sends counts as well: it comes
	// right after the last deletion, and a request is never dropped so.
	last := e.order.remove[len(e.order.remove)-1]
	inRestore := make(chan struct{}, 1)
	seen := func(*nats.Msg) {
		select {
		case inRestore <- struct{}{}:
		default:
		}
	}
	for _, subject := range []string{"$JS.EVENT.ADVISORY.STREAM.DELETED." + last, "$JS.API.STREAM.RESTORE.*"} {
		sub, err := e.nc.Subscribe(subject, seen)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	replied := make(chan reply, 1)
	go func() {
		replied <- call(context.Background(), e.nc, "restore-kept", e.restoreBody("server restart test"), 10*time.Minute)
	}()
	select {
	case <-inRestore:
	case r := <-replied:
		t.Fatalf("restore-kept finished (%s) before the advisory of %s's deletion or the first restore request arrived\n%s", r, last, tail(k.p.log.String()))
	case <-time.After(5 * time.Minute):
		t.Fatalf("%s was not deleted within 5 minutes\n%s", last, tail(k.p.log.String()))
	}
	e.srv.restart(t)

	var r reply
	select {
	case r = <-replied:
	case <-time.After(10 * time.Minute):
		t.Errorf("restore-kept did not answer within 10 minutes of the server restart")
	}
	t.Logf("restore-kept during the server restart: %s", r)

	e.expectWhole(t, k, live, before)
}

// expectWhole waits for the running keeper to leave the kept data whole
// (the live data or the point) with no journal, lease or .partial left; if
// it does not, that is an error, and a restarted keeper gets its chance.
// Then the restore's aside must be complete, verify and hold the live data.
func (e *bigEnv) expectWhole(t *testing.T, k *keeperProc, live state, before []string) {
	t.Helper()
	known := map[string]state{"the live data before the restore": live, "the restore point": e.point}
	whole := func(limit time.Duration) (string, string) {
		var name, diffs string
		waitFor(limit, func() bool {
			if len(staleKeys(t, e.js)) > 0 || len(leftovers(t, e.dir)) > 0 {
				time.Sleep(500 * time.Millisecond)
				return false
			}
			name, diffs = match(dumpState(t, e.js, e.module, e.local), known)
			if name == "" {
				time.Sleep(time.Second)
			}
			return name != ""
		})
		return name, diffs
	}
	name, diffs := whole(100 * time.Second)
	if name == "" {
		t.Errorf("the running keeper did not make the kept data whole within 100 s of the fault "+
			"(stale: %v, left: %v); the issue wants it to recover without a restart. Differences:\n%s\nkeeper log:\n%s",
			staleKeys(t, e.js), leftovers(t, e.dir), clip(diffs), longTail(k.p.log.String()))
		k.p.stop(t, syscall.SIGTERM, 2*time.Minute)
		k = startKeeper(t, e.srv.url(), e.dir, e.home)
		waitKeepers(t, e.nc, 1, k)
		if name, diffs = whole(100 * time.Second); name == "" {
			t.Fatalf("even a restarted keeper did not make the kept data whole (stale: %v, left: %v):\n%s\n%s",
				staleKeys(t, e.js), leftovers(t, e.dir), clip(diffs), longTail(k.p.log.String()))
		}
		t.Logf("after a keeper restart the kept data is %s", name)
	} else {
		t.Logf("without a keeper restart the kept data is %s", name)
	}
	var fresh []string
	for _, id := range asides(t, e.dir) {
		if !contains(before, id) {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) != 1 {
		t.Fatalf("want exactly one new aside, found %v", fresh)
	}
	verifyArchive(t, filepath.Join(e.dir, "aside", fresh[0]))
	if !sameStates(archiveStates(t, filepath.Join(e.dir, "aside", fresh[0], "bus.tar")), live.streamStates()) {
		t.Errorf("the aside does not hold the live data")
	}
	// And the keeper serves: a dry run plans.
	if d := call(context.Background(), e.nc, "restore-kept", e.restoreDry(), time.Minute); d.Code != 200 {
		t.Errorf("after the restart the keeper does not plan a restore: %s", d)
	}
}

func (e *bigEnv) restoreDry() []byte {
	b, _ := json.Marshal(e.req(map[string]any{"form": 1, "fingerprint": "before", "why": "plan", "dry-run": true, "method": "full"}))
	return b
}

// ensureWhole puts the restore point back when an earlier failure left the
// kept data broken, so that each subtest starts from a whole kept data.
func (e *bigEnv) ensureWhole(t *testing.T) {
	t.Helper()
	missing := false
	for _, s := range keptStreams(e.module, e.local) {
		if _, err := e.js.Stream(context.Background(), s); err != nil {
			missing = true
		}
	}
	if !missing {
		return
	}
	t.Logf("an earlier failure left the kept data broken; restoring the point first")
	k := startKeeper(t, e.srv.url(), e.dir, e.home)
	waitKeepers(t, e.nc, 1, k)
	mustCall(t, e.nc, "restore-kept", e.req(map[string]any{"form": 1, "fingerprint": "before", "why": "repair after a failed subtest", "method": "full"}))
	k.p.stop(t, syscall.SIGTERM, 2*time.Minute)
}

// dropAt connects the keeper through a proxy that lets its request on
// subject through to the server and then drops the connection before the
// reply: the server did it, the keeper does not know.
func (e *bigEnv) dropAt(t *testing.T, subject string) {
	e.ensureWhole(t)
	live := e.change(t)
	before := asides(t, e.dir)
	p := startDropProxy(t, fmt.Sprintf("127.0.0.1:%d", e.srv.port), []byte(subject+" "))
	k := startKeeper(t, "nats://"+p.addr(), e.dir, e.home)
	waitKeepers(t, e.nc, 1, k)
	p.armed.Store(true)
	r := call(context.Background(), e.nc, "restore-kept", e.restoreBody("connection drop at "+subject), 10*time.Minute)
	select {
	case <-p.fired:
	default:
		t.Fatalf("the keeper never sent %s; restore-kept replied %s", subject, r)
	}
	t.Logf("restore-kept with the connection dropped after %s: %s", subject, r)
	e.expectWhole(t, k, live, before)
}
