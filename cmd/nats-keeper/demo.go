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
	step := 0
	say := func(format string, a ...any) {
		step++
		fmt.Fprintf(o.Out, "\n%d. %s\n", step, fmt.Sprintf(format, a...))
	}
	show := func(format string, a ...any) { fmt.Fprintf(o.Out, "   "+format+"\n", a...) }

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

	say("Starting an embedded nats-server with JetStream and a keeper, in %s", tmp)
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
	show("server %s; keeper answering on %s.<verb>", s.ClientURL(), verbs.DefaultPrefix)

	js, err := jetstream.New(nc)
	if err != nil {
		return kept.Errorf(kept.ErrNoBus, "could not use JetStream on the embedded server: %v", err)
	}
	c := verbs.NewClient(nc)
	n := sample.NamesOf(demoModule, demoLocal)

	say("Making module %s's kept data %s: KV bucket, object store, stream and consumers", demoModule, demoLocal)
	if err := sample.Create(ctx, js, demoModule, demoLocal); err != nil {
		return kept.Errorf(kept.ErrFailed, "%w", err)
	}
	before, err := describe(ctx, js, n)
	if err != nil {
		return err
	}
	before.print(show)

	req := kept.Request{Module: demoModule, Local: demoLocal, Form: 3, Fingerprint: "9f2c1a7e",
		CatchUp: "ledger-migrate-3-to-4", Caller: "demo"}
	say("Taking a restore point: snapshot-kept %s %s --form 3 --before 9f2c1a7e", demoModule, demoLocal)
	rep, err := c.SnapshotKept(ctx, req)
	if err != nil {
		return err
	}
	show("%s", rep.Said)

	say("Changing the data, as a migration would: new and deleted keys, a new object, new messages, acks")
	if err := sample.Change(ctx, js, demoModule, demoLocal); err != nil {
		return kept.Errorf(kept.ErrFailed, "%w", err)
	}
	changed, err := describe(ctx, js, n)
	if err != nil {
		return err
	}
	changed.print(show)

	say("Restoring the point: restore-kept %s %s --form 3 --before 9f2c1a7e --why ...", demoModule, demoLocal)
	req.Why = "demo: undo the change"
	rep, err = c.RestoreKept(ctx, req)
	if err != nil {
		return err
	}
	show("%s", rep.Said)
	if rep.Aside == nil {
		return kept.Errorf(kept.ErrFailed, "the restore did not say where the live data was set aside")
	}
	aside := rep.Aside.ID

	say("Checking that the data is back as it was")
	after, err := describe(ctx, js, n)
	if err != nil {
		return err
	}
	after.print(show)
	if d := sample.Diff(before.dump, after.dump); d != "" {
		return kept.Errorf(kept.ErrFailed, "the restored data differs from the data at the restore point:\n%s", d)
	}
	if before.events == nil || after.events == nil || before.events.AckFloor != after.events.AckFloor {
		return kept.Errorf(kept.ErrFailed, "the position of %s on %s was not set back", n.Events, sample.SharedStream)
	}
	show("every message, key, revision, object and consumer position equals the state at the restore point")

	say("The changed data was set aside, not lost: list %s %s", demoModule, demoLocal)
	rep, err = c.ListKept(ctx, kept.Request{Module: demoModule, Local: demoLocal})
	if err != nil {
		return err
	}
	for _, a := range rep.Asides {
		show("aside %s (%s, %s): %s", a.ID, a.Reason, humanBytes(a.ArchiveSize), a.Dir)
	}
	for _, p := range rep.Points {
		show("point %s.%s form %d before %s (%s)", p.Module, p.Local, p.Form, p.Fingerprint, humanBytes(p.ArchiveSize))
	}

	say("Discarding the set-aside copy, on a person's call: discard-aside %s --why ...", aside)
	rep, err = c.DiscardAside(ctx, aside, kept.Request{Why: "demo: the restore was checked", Caller: "demo"})
	if err != nil {
		return err
	}
	show("%s", rep.Said)
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
