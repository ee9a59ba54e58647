package sample

import (
	"bytes"
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Change changes everything Create made for module and local: new KV keys,
// updates, a deletion and a purge; the big object replaced with other bytes
// and a new object; new stream messages and more acks on both consumers; new
// events on SharedStream and more acks on `<module>-events`. OtherConsumer is
// not touched.
func Change(ctx context.Context, js jetstream.JetStream, module, local string) error {
	if err := checkNames(module, local); err != nil {
		return err
	}
	ctx, cancel := setupCtx(ctx)
	defer cancel()
	n := NamesOf(module, local)
	r := seedOf(module, local, 1)

	kv, err := js.KeyValue(ctx, n.Bus)
	if err != nil {
		return fmt.Errorf("sample: open KV bucket %s: %w", n.Bus, err)
	}
	for _, p := range [][2]string{
		{"new.1", "new one"}, {"new.2", "new two"}, {"user.1", "user 1 changed"},
		{"user.2", "user 2 changed"}, {"tmp.a", "tmp a is back"}, {"config.colour", "red"},
	} {
		if _, err := kv.PutString(ctx, p[0], p[1]); err != nil {
			return fmt.Errorf("sample: put %s in %s: %w", p[0], n.Bus, err)
		}
	}
	if err := kv.Delete(ctx, "user.4"); err != nil {
		return fmt.Errorf("sample: delete user.4 in %s: %w", n.Bus, err)
	}
	if err := kv.Delete(ctx, "config.size"); err != nil {
		return fmt.Errorf("sample: delete config.size in %s: %w", n.Bus, err)
	}
	if err := kv.Purge(ctx, "user.5"); err != nil {
		return fmt.Errorf("sample: purge user.5 in %s: %w", n.Bus, err)
	}

	obs, err := js.ObjectStore(ctx, n.Bus)
	if err != nil {
		return fmt.Errorf("sample: open object store %s: %w", n.Bus, err)
	}
	meta := jetstream.ObjectMeta{Name: BigObject, Opts: &jetstream.ObjectMetaOptions{ChunkSize: ChunkSize}}
	if _, err := obs.Put(ctx, meta, bytes.NewReader(randBytes(r, BigChangedSize))); err != nil {
		return fmt.Errorf("sample: replace %s in %s: %w", BigObject, n.Bus, err)
	}
	if _, err := obs.PutString(ctx, "extra.txt", "added by the change\n"); err != nil {
		return fmt.Errorf("sample: put extra.txt in %s: %w", n.Bus, err)
	}

	if err := publishStream(ctx, js, module, local, 50, 20); err != nil {
		return err
	}
	for _, a := range []struct {
		name  string
		count int
	}{{n.Reader, 10}, {n.Audit, 5}} {
		c, err := js.Consumer(ctx, n.Stream, a.name)
		if err != nil {
			return fmt.Errorf("sample: open consumer %s on %s: %w", a.name, n.Stream, err)
		}
		if err := Ack(ctx, c, a.count); err != nil {
			return err
		}
	}

	if err := publishEvents(ctx, js, module, 15, 10); err != nil {
		return err
	}
	c, err := js.Consumer(ctx, SharedStream, n.Events)
	if err != nil {
		return fmt.Errorf("sample: open consumer %s on %s: %w", n.Events, SharedStream, err)
	}
	return Ack(ctx, c, 4)
}
