package keepertest_test

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keepertest"
	"github.com/nats-keeper/nats-keeper/kept"
)

// A restore point of a module's KV bucket, a change, and the restore that
// undoes it, on a harness made without a test. In a test, Start(t) does the
// same and stops it when the test ends.
func ExampleNew() {
	k, err := keepertest.New()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Close()
	ctx := context.Background()
	js, err := k.JetStream()
	if err != nil {
		fmt.Println(err)
		return
	}
	// Module billing's kept data ledger: its KV bucket billing_ledger.
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "billing_ledger"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := kv.PutString(ctx, "invoice.1", "open"); err != nil {
		fmt.Println(err)
		return
	}

	req := kept.Request{Module: "billing", Local: "ledger", Form: 1, Fingerprint: "v2", Caller: "example"}
	rep, err := k.Client.SnapshotKept(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("point:", rep.Point.Dir)

	if _, err := kv.PutString(ctx, "invoice.1", "lost"); err != nil {
		fmt.Println(err)
		return
	}
	req.Why = "the change went wrong"
	rep, err = k.Client.RestoreKept(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	e, err := kv.Get(ctx, "invoice.1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("invoice.1:", string(e.Value()))
	fmt.Println("set aside:", rep.Aside != nil)
	// Output:
	// point: points/billing/ledger/f1-v2
	// invoice.1: open
	// set aside: true
}

// A harness with its own subject prefix and index bucket, as a module's
// tests would use to match their deployment.
func ExampleWithPrefix() {
	k, err := keepertest.New(keepertest.WithPrefix("acme.keeper"), keepertest.WithBucket("acme_kept"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer k.Close()
	rep, err := k.Client.ListKept(context.Background(), kept.Request{Caller: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(k.Client.Prefix(), len(rep.Points))
	// Output:
	// acme.keeper 0
}
