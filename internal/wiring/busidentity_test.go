package wiring_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nats-keeper/nats-keeper/internal/jstest"
	"github.com/nats-keeper/nats-keeper/internal/natstest"
	"github.com/nats-keeper/nats-keeper/internal/testbed"
	"github.com/nats-keeper/nats-keeper/internal/wiring"
	"github.com/nats-keeper/nats-keeper/jsbus"
	"github.com/nats-keeper/nats-keeper/kept"
	"github.com/nats-keeper/nats-keeper/verbs"
)

// identityConf: the keeper in its own account, KEEPER, exporting its verbs;
// APP imports them with share: true, OTHER without.
const identityConf = `
accounts {
  KEEPER {
    jetstream: enabled
    users = [ { user: keeper, password: k }, { user: insider, password: i } ]
    exports = [ { service: "mesh-broker.*" } ]
  }
  APP {
    users = [ { user: appA, password: a } ]
    imports = [ { service: { account: KEEPER, subject: "mesh-broker.*" }, share: true } ]
  }
  OTHER {
    users = [ { user: appB, password: b } ]
    imports = [ { service: { account: KEEPER, subject: "mesh-broker.*" } } ]
  }
}
`

// TestActsRecordWhoTheBusSays: an act records, beside the caller the
// request claims, who the bus says asked. Through a service import with
// share: true it is the importing user and account, from the header the
// server sets, whatever header the client sent (the server overwrites it);
// without share, the account alone. A request from the keeper's own
// account has no header the server vouches for: the act records the
// keeper's own connection ("the bus gave no identity"), and a header that
// names the keeper's own account is not believed. One that names another
// account is, as nothing tells it from the server's: a client inside the
// keeper's account can write it, which is why that account must hold the
// keeper alone (README, *Who asked*).
func TestActsRecordWhoTheBusSays(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "server.conf")
	if err := os.WriteFile(path, []byte(identityConf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	base := natstest.Options(filepath.Join(dir, "store"))
	opts.Host, opts.Port, opts.JetStream, opts.StoreDir = base.Host, base.Port, true, base.StoreDir
	opts.NoLog, opts.NoSigs, opts.ServerName = true, true, base.ServerName
	s := natstest.Start(t, opts)
	keeperConn := natstest.Connect(t, s, nats.UserInfo("keeper", "k"))
	st := testbed.FileStore(t, filepath.Join(dir, "keeper"))
	k, err := wiring.Start(context.Background(), keeperConn, wiring.Setup{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop() })

	ask := func(user, password, local, header string) kept.BusIdentity {
		t.Helper()
		nc := natstest.Connect(t, s, nats.UserInfo(user, password), nats.Name(user+"-conn"))
		body, _ := json.Marshal(kept.Request{Module: "ids", Local: local, Streams: []string{"IDS_" + local}, Caller: "ceo@corp", Why: "test"})
		m := nats.NewMsg(verbs.DefaultPrefix + "." + kept.VerbSetPlan)
		m.Data = body
		if header != "" {
			m.Header.Set(verbs.RequestInfoHeader, header)
		}
		reply, err := nc.RequestMsg(m, time.Minute)
		if err != nil {
			t.Fatalf("set-plan as %s: %v", user, err)
		}
		if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
			t.Fatalf("set-plan as %s: %s %s", user, code, reply.Header.Get("Nats-Service-Error"))
		}
		for _, a := range jstest.StoredActs(t, mustJS(t, keeperConn), jsbus.DefaultActsStream) {
			if a.Verb == kept.VerbSetPlan && a.Local == local {
				if a.Caller != "ceo@corp" {
					t.Errorf("%s: the act's caller is %q, want the claimed ceo@corp", local, a.Caller)
				}
				if a.BusIdentity == nil {
					t.Fatalf("%s: the act has no bus-identity", local)
				}
				return *a.BusIdentity
			}
		}
		t.Fatalf("%s: no set-plan act", local)
		return kept.BusIdentity{}
	}
	check := func(what string, got kept.BusIdentity, source, account, user string, ignored bool) {
		t.Helper()
		if got.Source != source || got.Account != account || got.User != user || (got.Ignored != "") != ignored {
			t.Errorf("%s: bus-identity %+v; want source %s, account %q, user %q, ignored %v", what, got, source, account, user, ignored)
		}
	}
	spoof := `{"acc":"KEEPER","user":"root","name":"spoofed"}`

	got := ask("appA", "a", "shared", spoof)
	check("appA through the import with share", got, kept.IdentityRequestInfo, "APP", "appA", false)
	if got.Name != "appA-conn" {
		t.Errorf("appA's connection name is %q, want appA-conn: the server's header, not the one appA sent", got.Name)
	}
	check("appB through the import without share", ask("appB", "b", "unshared", ""), kept.IdentityRequestInfo, "OTHER", "", false)
	check("a client of the keeper's account", ask("insider", "i", "inside", ""), kept.IdentityKeeper, "KEEPER", "keeper", false)
	check("a client of the keeper's account naming that account", ask("insider", "i", "spoofown", spoof), kept.IdentityKeeper, "KEEPER", "keeper", true)
	check("a client of the keeper's account naming another", ask("insider", "i", "spoofother", `{"acc":"APP","user":"appA"}`),
		kept.IdentityRequestInfo, "APP", "appA", false)
}

func mustJS(t *testing.T, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
