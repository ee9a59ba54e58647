// Package orders is a module's own code, as an example of testing a
// migration with nats-keeper's keepertest harness: module shop keeps its
// orders in the KV bucket shop_orders (kept data "orders"), and Migrate
// brings them from form 1 ({"total": 12.5}) to form 2 ({"total_cents":
// 1250}), key by key, failing half-way on an order it cannot read.
package orders

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/nats-io/nats.go/jetstream"
)

// Module, Local and Bucket name the orders' kept data on the bus.
const (
	Module = "shop"
	Local  = "orders"
	Bucket = Module + "_" + Local
)

// V1 is an order at form 1; V2 at form 2.
type (
	V1 struct {
		Total *float64 `json:"total"`
	}
	V2 struct {
		TotalCents int64 `json:"total_cents"`
	}
)

// Migrate rewrites every order of kv from form 1 to form 2, in key order.
// It stops at the first order it cannot convert, leaving those before it
// converted: the half-done state a restore point is for.
func Migrate(ctx context.Context, kv jetstream.KeyValue) error {
	keys, err := kv.Keys(ctx)
	if err != nil {
		return fmt.Errorf("list the orders: %w", err)
	}
	for _, key := range keys {
		e, err := kv.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("read order %s: %w", key, err)
		}
		var v1 V1
		if err := json.Unmarshal(e.Value(), &v1); err != nil {
			return fmt.Errorf("order %s is not form 1: %w", key, err)
		}
		if v1.Total == nil {
			return fmt.Errorf("order %s has no total: %w", key, errors.ErrUnsupported)
		}
		v2, err := json.Marshal(V2{TotalCents: int64(math.Round(*v1.Total * 100))})
		if err != nil {
			return err
		}
		if _, err := kv.Update(ctx, key, v2, e.Revision()); err != nil {
			return fmt.Errorf("write order %s: %w", key, err)
		}
	}
	return nil
}
