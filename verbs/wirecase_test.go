package verbs

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/nats-keeper/nats-keeper/kept"
)

// A client of this release reads the reply of a keeper of the release
// before, whose keys were snake_case, and the reply of this one, which
// carries both; and a keeper of the release before, reading this one's
// reply with the old keys, finds them (README, "Wire casing").
func TestClientReadsRepliesInEitherCasing(t *testing.T) {
	old := `{"said":"listed.","points":[{"module":"billing","local":"ledger","archive_size":10240,"position_count":2,` +
		`"streams":[{"name":"S","first_seq":1,"last_seq":9}],"encrypted":{"format":"age","plain_size":9000}}],` +
		`"totals":[{"module":"billing","local":"ledger","points":1,"point_bytes":10240}],"total_bytes":10240}`
	now := strings.NewReplacer("archive_size", "archive-size", "position_count", "position-count", "first_seq", "first-seq",
		"last_seq", "last-seq", "plain_size", "plain-size", "point_bytes", "point-bytes", "total_bytes", "total-bytes").Replace(old)
	var written []byte
	for _, body := range []string{old, now} {
		msg := nats.NewMsg("_INBOX.x")
		msg.Data = []byte(body)
		rep, err := decodeReply("mesh-broker.list-kept", msg)
		if err != nil {
			t.Fatal(err)
		}
		p := rep.Points[0]
		if p.ArchiveSize != 10240 || p.PositionCount != 2 || p.Streams[0].FirstSeq != 1 || p.Streams[0].LastSeq != 9 ||
			p.Encrypted.PlainSize != 9000 || rep.Totals[0].PointBytes != 10240 || rep.TotalBytes != 10240 {
			t.Fatalf("%s read as %+v %+v", body, rep, p)
		}
		b, _ := json.Marshal(rep)
		if written != nil && !bytes.Equal(b, written) {
			t.Fatalf("the two casings read differently:\n%s\n%s", written, b)
		}
		written = b
	}
	for _, pair := range []string{`"archive-size":10240,"archive_size":10240`, `"total-bytes":10240,"total_bytes":10240`,
		`"first-seq":1,"first_seq":1`, `"point-bytes":10240,"point_bytes":10240`, `"plain-size":9000,"plain_size":9000`} {
		if !bytes.Contains(written, []byte(pair)) {
			t.Errorf("the reply written holds no %s: %s", pair, written)
		}
	}
}

// No request key was ever snake_case, so none is accepted in that casing:
// the decoder stays strict, and says which key it refused.
func TestRequestKeysInSnakeCaseAreRefused(t *testing.T) {
	for _, body := range []string{`{"module":"a","local":"b","catch_up":"m"}`, `{"module":"a","local":"b","why":"w","dry_run":true}`,
		`{"module":"a","local":"b","keep_for":"1h"}`, `{"module":"a","local":"b","policy":{"keep_last":1}}`} {
		if _, err := DecodeRequest(kept.VerbSnapshot, []byte(body)); err == nil || !strings.Contains(err.Error(), "_") {
			t.Errorf("%s: %v", body, err)
		}
	}
	for name, key := range requestKeys {
		if key && strings.Contains(name, "_") {
			t.Errorf("the request key %q is not kebab-case", name)
		}
	}
}

// Every key of kept.Request's JSON is one the decoder takes: a field added
// to the request and not to requestKeys would be refused on the wire.
func TestEveryRequestFieldIsARequestKey(t *testing.T) {
	rt := reflect.TypeFor[kept.Request]()
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "-" || !rt.Field(i).IsExported() {
			continue
		}
		if !requestKeys[name] {
			t.Errorf("kept.Request's %s is %q on the wire, which DecodeRequest refuses: add it to requestKeys", rt.Field(i).Name, name)
		}
	}
}
