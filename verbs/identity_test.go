package verbs

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/nats-keeper/nats-keeper/kept"
)

func TestParseRequestInfo(t *testing.T) {
	id, ignored := ParseRequestInfo(`{"acc":"APP","user":"appA","name":"billing-deploy","host":"10.0.0.7","server":"n1","rtt":1200}`, "KEEPER")
	if ignored != "" || id == nil || *id != (kept.BusIdentity{Source: kept.IdentityRequestInfo, Account: "APP", User: "appA",
		Name: "billing-deploy", Host: "10.0.0.7", Server: "n1"}) {
		t.Errorf("a share: true header: %+v, ignored %q", id, ignored)
	}
	if got := id.String(); got != `appA (connection "billing-deploy") in account APP` {
		t.Errorf("said as %q", got)
	}
	for header, why := range map[string]string{
		`{"acc":"KEEPER","user":"root"}`: "naming the keeper's own account KEEPER, which no service import sets",
		`{"user":"root"}`:                "names no account",
		`not json`:                       "not valid JSON",
	} {
		if id, ignored := ParseRequestInfo(header, "KEEPER"); id != nil || !strings.Contains(ignored, why) {
			t.Errorf("%s: %+v, ignored %q; want nil and %q", header, id, ignored, why)
		}
	}
}

// A request cannot carry its own bus identity: the key is refused as any
// unknown key is.
func TestDecodeRequestRefusesABusIdentity(t *testing.T) {
	for _, body := range []string{
		`{"bus-identity":{"source":"request-info","account":"SYS","user":"root"}}`,
		`{"BusIdentity":{"source":"request-info","account":"SYS","user":"root"}}`,
	} {
		r, err := DecodeRequest(kept.VerbList, []byte(body))
		if !errors.Is(err, kept.ErrBadRequest) || r.BusIdentity != nil {
			t.Errorf("%s: %+v %v; want a bad request", body, r, err)
		}
	}
}

// FuzzParseRequestInfo: the header comes from the bus (or, inside the
// keeper's account, from any client); parsing it never panics, a header
// it takes names an account other than the keeper's, and every field it
// keeps is valid UTF-8 of at most 256 bytes.
func FuzzParseRequestInfo(f *testing.F) {
	f.Add(`{"acc":"APP","user":"appA","name":"x"}`, "KEEPER")
	f.Add(`{"acc":"KEEPER"}`, "KEEPER")
	f.Add(`{"acc":"\xff\xfe","user":"`+strings.Repeat("é", 200)+`"}`, "")
	f.Add(`[]`, "K")
	f.Fuzz(func(t *testing.T, header, own string) {
		id, ignored := ParseRequestInfo(header, own)
		if (id == nil) == (ignored == "") {
			t.Fatalf("%q: identity %+v and ignored %q: want exactly one", header, id, ignored)
		}
		if id == nil {
			return
		}
		if id.Account == "" || (own != "" && id.Account == own) || id.Source != kept.IdentityRequestInfo {
			t.Fatalf("%q (own %q): took %+v", header, own, id)
		}
		for _, s := range []string{id.Account, id.User, id.Name, id.Host, id.Server, id.Cluster} {
			if len(s) > maxIdentityField || !utf8.ValidString(s) {
				t.Fatalf("%q: a field %q is over 256 bytes or not UTF-8", header, s)
			}
		}
	})
}
