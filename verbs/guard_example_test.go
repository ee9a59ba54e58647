package verbs_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keepertest"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// A migration wrapped in a restore point: it fails half-way, and Guard puts
// the bucket back as it was, the half-migrated data set aside.
func ExampleClient_Guard() {
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
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "billing_ledger"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := kv.PutString(ctx, "invoice.1", `{"total": 100}`); err != nil {
		fmt.Println(err)
		return
	}

	req := verbs.GuardRequest{Module: "billing", Local: "ledger", Form: 3, Fingerprint: "v4",
		CatchUp: "ledger-migrate-3-to-4", Caller: "deploy"}
	res, err := k.Client.Guard(ctx, req, func(ctx context.Context) error {
		if _, err := kv.PutString(ctx, "invoice.1", `{"total_cents": 10000}`); err != nil {
			return err
		}
		return errors.New("invoice.2: no total")
	})
	fmt.Println("error:", err != nil)
	fmt.Println("restored:", res.Restored != nil, "aside:", res.Aside != "", "catch-up:", res.CatchUp)
	e, err := kv.Get(ctx, "invoice.1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("invoice.1:", string(e.Value()))
	// Output:
	// error: true
	// restored: true aside: true catch-up: ledger-migrate-3-to-4
	// invoice.1: {"total": 100}
}
