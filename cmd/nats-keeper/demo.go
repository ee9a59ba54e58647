package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/nats-keeper/nats-keeper/internal/embedded"
	"github.com/nats-keeper/nats-keeper/internal/sample"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// The demo's module and kept data.
const (
	demoModule = "billing"
	demoLocal  = "ledger"
)

type demoOptions struct {
	Out io.Writer // the steps
	Err io.Writer // the keeper's warnings
}

func newDemoCmd(e env) *cobra.Command {
	o := demoOptions{Out: e.Out, Err: e.Err}
	return &cobra.Command{
		Use:   "demo",
		Short: "Show a snapshot and a restore on an embedded server, then clean up",
		Long: `Start an embedded nats-server and a keeper in this process, make a sample
module's kept data (a KV bucket, an object store, a stream and consumers), take
a restore point, change the data, restore it, show that it is back as it was,
discard the set-aside copy, and clean up. Needs nothing but this binary.`,
		Args: args(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error { return ran(runDemo(cmd.Context(), o)) },
	}
}

func runDemo(ctx context.Context, o demoOptions) (err error) {
	d := &demo{out: o.Out}
	tmp, err := os.MkdirTemp("", "nats-keeper-demo-")
	if err != nil {
		return kept.Errorf(kept.ErrFailed, "could not make a temporary directory, so the demo did not start: %v", err)
	}
	defer func() {
		if rerr := os.RemoveAll(tmp); rerr != nil && err == nil {
			err = kept.Errorf(kept.ErrFailed, "the demo ran but its temporary directory %s could not be removed: %v", tmp, rerr)
		} else if rerr == nil {
			fmt.Fprintf(o.Out, "\nRemoved %s. The demo is done.\n", tmp)
		}
	}()

	d.say("Starting an embedded nats-server with JetStream and a keeper, in %s", tmp)
	s, err := embedded.Run(embedded.Options(filepath.Join(tmp, "nats")))
	if err != nil {
		return kept.Errorf(kept.ErrFailed, "%v, so the demo did not start", err)
	}
	defer func() { s.Shutdown(); s.WaitForShutdown() }()
	nc, err := nats.Connect(s.ClientURL(), nats.Name("nats-keeper demo"))
	if err != nil {
		return kept.Errorf(kept.ErrNoBus, "could not connect to the embedded server: %v", err)
	}
	defer nc.Close()
	log := slog.New(slog.NewTextHandler(o.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := openStore(ctx, "", filepath.Join(tmp, "keeper"), storeFlags{}, log)
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := startKeeper(ctx, nc, keeperSetup{Store: st}, log)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	d.show("server %s; keeper answering on %s.<verb>", s.ClientURL(), verbs.DefaultPrefix)
	return d.run(ctx, nc)
}

// demo is the demo's tour of a keeper on nc: its numbered steps, and what
// it shows of each, written to out.
type demo struct {
	out  io.Writer
	step int
	js   jetstream.JetStream
	c    *verbs.Client
	n    sample.Names
}

// say begins the next numbered step.
func (d *demo) say(format string, a ...any) {
	d.step++
	fmt.Fprintf(d.out, "\n%d. %s\n", d.step, fmt.Sprintf(format, a...))
}

// show writes a line of what a step shows.
func (d *demo) show(format string, a ...any) { fmt.Fprintf(d.out, "   "+format+"\n", a...) }

// run takes the tour on the keeper answering on nc: the sample's kept data
// made, a point taken, the data changed, the point restored and checked,
// the listing, and the set-aside copy discarded.
func (d *demo) run(ctx context.Context, nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return kept.Errorf(kept.ErrNoBus, "could not use JetStream on the embedded server: %v", err)
	}
	d.js, d.c, d.n = js, verbs.NewClient(nc), sample.NamesOf(demoModule, demoLocal)

	d.say("Making module %s's kept data %s: KV bucket, object store, stream and consumers", demoModule, demoLocal)
	if err := sample.Create(ctx, js, demoModule, demoLocal); err != nil {
		return kept.Errorf(kept.ErrFailed, "%w", err)
	}
	before, err := d.describe(ctx)
	if err != nil {
		return err
	}

	req := kept.Request{Module: demoModule, Local: demoLocal, Form: 3, Fingerprint: "9f2c1a7e",
		CatchUp: "ledger-migrate-3-to-4", Caller: "demo"}
	d.say("Taking a restore point: snapshot-kept %s %s --form 3 --before 9f2c1a7e", demoModule, demoLocal)
	rep, err := d.c.SnapshotKept(ctx, req)
	if err != nil {
		return err
	}
	d.show("%s", rep.Said)

	d.say("Changing the data, as a migration would: new and deleted keys, a new object, new messages, acks")
	if err := sample.Change(ctx, js, demoModule, demoLocal); err != nil {
		return kept.Errorf(kept.ErrFailed, "%w", err)
	}
	if _, err := d.describe(ctx); err != nil {
		return err
	}

	aside, err := d.restore(ctx, req, before)
	if err != nil {
		return err
	}
	if err := d.list(ctx); err != nil {
		return err
	}
	return d.discard(ctx, aside)
}

// describe reads the kept data and shows it.
func (d *demo) describe(ctx context.Context) (*state, error) {
	st, err := describe(ctx, d.js, d.n)
	if err != nil {
		return nil, err
	}
	st.print(d.show)
	return st, nil
}

// restore restores the point taken by req, checks that the data is back as
// it was before, and gives the id of the set-aside copy of what was live.
func (d *demo) restore(ctx context.Context, req kept.Request, before *state) (string, error) {
	d.say("Restoring the point: restore-kept %s %s --form 3 --before 9f2c1a7e --why ...", demoModule, demoLocal)
	req.Why = "demo: undo the change"
	rep, err := d.c.RestoreKept(ctx, req)
	if err != nil {
		return "", err
	}
	d.show("%s", rep.Said)
	for _, s := range rep.Streams {
		d.show("%s: %s", s.Stream, s.Why)
	}
	if rep.Aside == nil {
		return "", kept.Errorf(kept.ErrFailed, "the restore did not say where the live data was set aside")
	}

	d.say("Checking that the data is back as it was")
	after, err := d.describe(ctx)
	if err != nil {
		return "", err
	}
	if diff := sample.Diff(rolledBack(before.dump, after.dump, rep.Streams), after.dump); diff != "" {
		return "", kept.Errorf(kept.ErrFailed, "the restored data differs from the data at the restore point:\n%s", diff)
	}
	if before.events == nil || after.events == nil || before.events.AckFloor != after.events.AckFloor {
		return "", kept.Errorf(kept.ErrFailed, "the position of %s on %s was not set back", d.n.Events, sample.SharedStream)
	}
	d.show("every message, key, revision, object and consumer position equals the state at the restore point " +
		"(a stream rolled back by delta keeps its last sequence, so no sequence is ever used twice)")
	return rep.Aside.ID, nil
}

// rolledBack is the state at the point as the restore must leave it: a
// stream rolled back by delta with its last sequence the one it has after
// (never lower than the point's).
func rolledBack(point, after *sample.Snapshot, streams []kept.StreamChange) *sample.Snapshot {
	out := &sample.Snapshot{}
	for _, s := range point.Streams {
		for _, c := range streams {
			if c.Stream != s.Name || c.Method != kept.MethodDelta {
				continue
			}
			for _, a := range after.Streams {
				if a.Name == s.Name && a.LastSeq >= s.LastSeq {
					s.LastSeq = a.LastSeq
				}
			}
		}
		out.Streams = append(out.Streams, s)
	}
	return out
}

// list shows the kept data's points and asides.
func (d *demo) list(ctx context.Context) error {
	d.say("The changed data was set aside, not lost: list %s %s", demoModule, demoLocal)
	rep, err := d.c.ListKept(ctx, kept.Request{Module: demoModule, Local: demoLocal})
	if err != nil {
		return err
	}
	for _, a := range rep.Asides {
		d.show("aside %s (%s, %s): %s", a.ID, a.Reason, humanBytes(a.ArchiveSize), a.Dir)
	}
	for _, p := range rep.Points {
		d.show("point %s.%s form %d before %s (%s)", p.Module, p.Local, p.Form, p.Fingerprint, humanBytes(p.ArchiveSize))
	}
	return nil
}

// discard discards the set-aside copy aside.
func (d *demo) discard(ctx context.Context, aside string) error {
	d.say("Discarding the set-aside copy, on a person's call: discard-aside %s --why ...", aside)
	rep, err := d.c.DiscardAside(ctx, aside, kept.Request{Why: "demo: the restore was checked", Caller: "demo"})
	if err != nil {
		return err
	}
	d.show("%s", rep.Said)
	return nil
}

// state is what the demo shows of a kept data.
type state struct {
	dump    *sample.Snapshot
	kv      map[string]sample.Entry
	bigSize int
	bigSHA  string
	stream  sample.StreamDump
	events  *sample.ConsumerDump // the module's consumer on the shared stream
}

func describe(ctx context.Context, js jetstream.JetStream, n sample.Names) (*state, error) {
	d, err := sample.Dump(ctx, js, n.Streams()...)
	if err != nil {
		return nil, kept.Errorf(kept.ErrFailed, "%w", err)
	}
	kv, err := sample.KV(ctx, js, n.Bus)
	if err != nil {
		return nil, kept.Errorf(kept.ErrFailed, "%w", err)
	}
	big, err := sample.Object(ctx, js, n.Bus, sample.BigObject)
	if err != nil {
		return nil, kept.Errorf(kept.ErrFailed, "%w", err)
	}
	sum := sha256.Sum256(big)
	st := &state{dump: d, kv: kv, bigSize: len(big), bigSHA: hex.EncodeToString(sum[:])}
	for _, s := range d.Streams {
		switch s.Name {
		case n.Stream:
			st.stream = s
		}
	}
	shared, err := sample.Dump(ctx, js, sample.SharedStream)
	if err != nil {
		return nil, kept.Errorf(kept.ErrFailed, "%w", err)
	}
	for _, c := range shared.Streams[0].Consumers {
		if c.Name == n.Events {
			st.events = &c
		}
	}
	return st, nil
}

func (s *state) print(show func(string, ...any)) {
	if e, ok := s.kv["user.1"]; ok {
		show("KV user.1 = %q (revision %d); %d live keys", e.Value, e.Revision, len(s.kv))
	} else {
		show("KV user.1 is absent; %d live keys", len(s.kv))
	}
	show("object %s: %d bytes, sha256 %s…", sample.BigObject, s.bigSize, s.bigSHA[:16])
	show("stream %s: %d messages, sequences %d..%d%s", s.stream.Name, s.stream.Msgs, s.stream.FirstSeq, s.stream.LastSeq,
		deletedNote(s.stream.Msgs, s.stream.FirstSeq, s.stream.LastSeq))
	for _, c := range s.stream.Consumers {
		show("consumer %s: acked up to %d, next message %d%s", c.Name, c.AckFloor, c.Next, unackedNote(c.AckFloor, c.Next))
	}
	if c := s.events; c != nil {
		show("consumer %s on the shared stream %s: acked up to %d, next message %d%s", c.Name, sample.SharedStream, c.AckFloor, c.Next,
			unackedNote(c.AckFloor, c.Next))
	}
}

// deletedNote explains a stream holding fewer messages than its sequences
// span: messages deleted in between.
func deletedNote(msgs, first, last uint64) string {
	if last < first || msgs >= last-first+1 {
		return ""
	}
	return fmt.Sprintf(" (%d deleted in between; a sequence is never reused)", last-first+1-msgs)
}

// unackedNote explains a consumer whose next message is past its ack floor
// plus one: messages delivered and not yet acknowledged, which the server
// delivers again if they are never acked.
func unackedNote(ackFloor, next uint64) string {
	switch {
	case next <= ackFloor+1:
		return ""
	case next == ackFloor+2:
		return fmt.Sprintf(" (message %d was delivered and waits for its ack)", ackFloor+1)
	}
	return fmt.Sprintf(" (messages %d..%d were delivered and wait for their acks)", ackFloor+1, next-1)
}
