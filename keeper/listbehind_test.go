package keeper_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/keeper"
)

// behindIndex is the real index whose many-read is a replica behind: it
// leaves out the records written last (a direct get on a cluster may be
// answered by a follower that has not applied them yet).
type behindIndex struct {
	*jsbus.Adapter
	missing map[string]bool
}

func (b *behindIndex) GetMany(ctx context.Context, keys []string) (map[string][]byte, error) {
	got, err := b.Adapter.GetMany(ctx, keys)
	for k := range b.missing {
		delete(got, k)
	}
	return got, err
}

// TestListKeptShowsARecordTheManyReadMissed: list-kept reads a page's
// records in one many-read, and a record that read does not return is read
// again from the leader, so a point just taken is listed.
func TestListKeptShowsARecordTheManyReadMissed(t *testing.T) {
	var b *behindIndex
	e := newEnv(t, func(c *keeper.Config) {
		b = &behindIndex{Adapter: c.Index.(*jsbus.Adapter), missing: map[string]bool{}}
		c.Index = b
	})
	for i := range 3 {
		e.snapshot(1, fmt.Sprintf("fp%d", i))
	}
	list, err := e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil || len(list.Points) != 3 {
		t.Fatalf("list-kept before: %d points, %v", len(list.Points), err)
	}
	b.missing["point."+module+"."+local+".f1-fp2"] = true
	list, err = e.k.ListKept(e.ctx, keeper.Request{Module: module, Local: local})
	if err != nil {
		t.Fatal(err)
	}
	var fps []string
	for _, p := range list.Points {
		fps = append(fps, p.Fingerprint)
	}
	slices.Sort(fps)
	if !slices.Equal(fps, []string{"fp0", "fp1", "fp2"}) {
		t.Fatalf("list-kept with a many-read behind: %v; want fp0, fp1, fp2", fps)
	}
}
