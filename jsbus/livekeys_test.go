package jsbus_test

import (
	"fmt"
	"slices"
	"testing"
)

// LiveKeys lists what Keys lists: keys put once, put again, removed, and
// put again after their removal, under a prefix and not beyond it; GetMany
// reads their values, a removed key absent.
func TestLiveKeysAndGetManyAgreeWithKeysAndGet(t *testing.T) {
	ctx := testCtx(t)
	b := newBus(t)
	for i := range 40 {
		if err := b.a.Put(ctx, fmt.Sprintf("point.m.l%02d.1.f", i), []byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.a.Put(ctx, "point.mm.l.1.f", []byte("{}")); err != nil { // another module, same first letter
		t.Fatal(err)
	}
	for i := range 10 {
		if err := b.a.Put(ctx, fmt.Sprintf("point.m.l%02d.1.f", i), []byte(`{"again":true}`)); err != nil {
			t.Fatal(err)
		}
	}
	for i := 5; i < 15; i++ {
		if err := b.a.Delete(ctx, fmt.Sprintf("point.m.l%02d.1.f", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.a.Put(ctx, "point.m.l07.1.f", []byte(`{"back":true}`)); err != nil {
		t.Fatal(err)
	}
	want, err := b.a.Keys(ctx, "point.m.")
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.a.LiveKeys(ctx, "point.m.")
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 31 || !slices.Equal(got, want) {
		t.Fatalf("LiveKeys %v, Keys %v (want 31 keys)", got, want)
	}
	values, err := b.a.GetMany(ctx, append(slices.Clone(want), "point.m.l06.1.f", "point.m.nothing.1.f"))
	if err != nil {
		t.Fatal(err)
	}
	if len(values) != len(want) {
		t.Errorf("GetMany gave %d values for %d live keys and 2 without a value", len(values), len(want))
	}
	for _, k := range want {
		v, err := b.a.Get(ctx, k)
		if err != nil || string(values[k]) != string(v) {
			t.Errorf("GetMany %s = %q, Get = %q, %v", k, values[k], v, err)
		}
	}
	if none, err := b.a.LiveKeys(ctx, "aside.m."); err != nil || len(none) != 0 {
		t.Errorf("LiveKeys of an empty prefix: %v, %v", none, err)
	}
}
