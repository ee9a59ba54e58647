package keeper_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// TestPointPositionsBound gives the module consumers whose positions take
// more than keeper.MaxPositionsSize bytes as point.json holds them:
// snapshot-kept refuses, before it takes anything, and says by how much.
// At exactly the bound the point is made, and point.json is read back; one
// byte more is refused again, and the live data is not set aside either,
// since its aside.json could not be read back.
func TestPointPositionsBound(t *testing.T) {
	e := newEnv(t)
	st, err := e.js.Stream(e.ctx, e.names.Stream)
	if err != nil {
		t.Fatal(err)
	}
	const pad = 100_000 // bytes of metadata each; the server takes up to 128 KiB
	big := func(name string, size int) error {
		_, err := st.CreateOrUpdateConsumer(e.ctx, jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy,
			Metadata: map[string]string{"pad": strings.Repeat("a", size)}})
		return err
	}
	var names []string
	for i := range keeper.MaxPositionsSize/pad + 1 {
		names = append(names, fmt.Sprintf("%s-big%02d", module, i))
	}
	inBatches(t, names, func(n string) error { return big(n, pad) })

	size := refused(t, e, req(3, "big"))
	if size <= keeper.MaxPositionsSize {
		t.Fatalf("refused at %d bytes of positions, within the bound %d", size, keeper.MaxPositionsSize)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "points", module, local)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused snapshot left something in the store: %v", err)
	}
	if keys, _ := e.bus.Keys(e.ctx, "point."); len(keys) != 0 {
		t.Errorf("a refused snapshot left index records: %v", keys)
	}

	// Exactly at the bound: made, and read back.
	over := size - keeper.MaxPositionsSize
	if err := big(names[0], pad-over); err != nil {
		t.Fatal(err)
	}
	rep, err := e.k.SnapshotKept(e.ctx, req(3, "big"))
	if err != nil {
		t.Fatalf("snapshot-kept with positions of exactly %d bytes: %v", keeper.MaxPositionsSize, err)
	}
	data, err := os.ReadFile(filepath.Join(e.dir, rep.Point.Dir, "point.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if got := len(rec["positions"]); got != keeper.MaxPositionsSize {
		t.Errorf("point.json holds %d bytes of positions, want exactly %d", got, keeper.MaxPositionsSize)
	}
	if len(data) > 4<<20 {
		t.Errorf("point.json is %d bytes, over the 4 MiB a keeper reads back", len(data))
	}
	dry := req(3, "big")
	dry.DryRun = true
	plan, err := e.k.RestoreKept(e.ctx, dry)
	if err != nil {
		t.Fatalf("a dry run of the point at the bound (point.json read back): %v", err)
	}
	if len(plan.Plan.Moves) < len(names) {
		t.Errorf("the dry run sets back %d consumers, want at least %d", len(plan.Plan.Moves), len(names))
	}

	// One byte over.
	if err := big(names[0], pad-over+1); err != nil {
		t.Fatal(err)
	}
	if got := refused(t, e, req(3, "over")); got != keeper.MaxPositionsSize+1 {
		t.Errorf("refused at %d bytes of positions, want %d", got, keeper.MaxPositionsSize+1)
	}
	before := e.kept()
	_, err = e.k.RestoreKept(e.ctx, req(3, "big"))
	if !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("restore-kept whose aside.json would pass the bound: %v, want a conflict", err)
	}
	t.Log(err)
	mustContain(t, err.Error(), "aside.json", strconv.Itoa(keeper.MaxPositionsSize+1), "so nothing was removed")
	if d := diffKept(e, before); d != "" {
		t.Errorf("the refused restore changed the live data:\n%s", d)
	}
	if asides, _ := e.bus.Keys(e.ctx, "aside."); len(asides) != 0 {
		t.Errorf("the refused restore recorded asides: %v", asides)
	}
}

var positionsTake = regexp.MustCompile(`take (\d+) bytes as point\.json`)

// refused runs snapshot-kept of r, which must be refused for its
// positions' size, and returns that size.
func refused(t *testing.T, e *env, r keeper.Request) int {
	t.Helper()
	_, err := e.k.SnapshotKept(e.ctx, r)
	if !errors.Is(err, keeper.ErrConflict) {
		t.Fatalf("snapshot-kept of positions over the bound: %v, want a conflict", err)
	}
	mustContain(t, err.Error(), "was not taken", "so no point was made", strconv.Itoa(keeper.MaxPositionsSize))
	t.Log(err)
	m := positionsTake.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("the refusal does not say the positions' size: %v", err)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
