package keeper_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-keeper/nats-keeper/keeper"
)

// A journal of a newer format, left by a newer keeper beside this one, holds
// back only its own kept data, with a sentence that names the keeper to run;
// a plan of a newer format is refused the same way, and every other kept data
// is served.
func TestNewerFormatHoldsBackOnlyItsOwn(t *testing.T) {
	e := newEnv(t)
	e.snapshot(1, "f1")
	newer := `{"module":"` + module + `","local":"` + local + `","aside":"x","point":"points/x","format":2,"written-by":"2.0.0","step":"restore","reposition":[]}`
	if err := e.bus.Put(e.ctx, "journal."+module+"."+local, []byte(newer)); err != nil {
		t.Fatal(err)
	}
	r := req(1, "f1")
	_, err := e.k.RestoreKept(e.ctx, r)
	want := "restore journal journal." + module + "." + local + " was written by a newer keeper (format 2, this keeper reads up to 1); run nats-keeper 2.0.0 or newer"
	if !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), want) {
		t.Fatalf("restore under a newer journal: %v\nwant it to say %q", err, want)
	}
	// Recovery leaves it waiting, with the same sentence, and no error of its own.
	rec, err := e.k.Recover(e.ctx)
	if err != nil || len(rec) != 1 || rec[0].State != keeper.RecoveryWaits || rec[0].Err == nil || !strings.Contains(rec[0].Err.Error(), want) {
		t.Fatalf("recovery beside a newer journal: %+v, %v\nwant it waiting, saying %q", rec, err, want)
	}
	if rep, err := e.k.ListKept(e.ctx, keeper.Request{}); err != nil || len(rep.Points) != 1 {
		t.Fatalf("list-kept beside a newer journal: %+v, %v", rep, err)
	}
	if err := e.bus.Put(e.ctx, "plan.other.data", []byte(`{"module":"other","local":"data","streams":["X"],"format":3}`)); err != nil {
		t.Fatal(err)
	}
	_, err = e.k.ShowPlan(e.ctx, keeper.Request{Module: "other", Local: "data"})
	if !errors.Is(err, keeper.ErrConflict) || !strings.Contains(err.Error(), "(format 3, this keeper reads up to 1); run a newer nats-keeper") {
		t.Fatalf("show-plan of a newer plan: %v", err)
	}
}
