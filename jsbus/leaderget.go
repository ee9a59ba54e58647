package jsbus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The index is read from its stream's leader, never with a direct get. A
// KV bucket allows direct gets, and on a cluster the followers answer them
// too (nats-server's subscribeToDirect: a queue group of every replica that
// is nearly current), so a read right after a write can come from a
// follower that has not yet applied it and say the key is missing or give
// its older value. The keeper reads back what it has just written (a lease
// it took, a journal, a point it recorded), so it asks the leader, which
// answers only after the write it acknowledged is applied.

// msgGetResponse is the reply of $JS.API.STREAM.MSG.GET.
type msgGetResponse struct {
	Message struct {
		Seq    uint64 `json:"seq"`
		Header []byte `json:"hdrs"`
		Data   []byte `json:"data"`
	} `json:"message"`
}

// codeNoMessage is the server's "no message found" (10037).
const codeNoMessage = 10037

// leaderGet is one try of reading key's newest entry from the leader of the
// index's stream: its value and revision, or jetstream.ErrKeyNotFound when
// the key is missing, deleted or purged.
func (a *Adapter) leaderGet(ctx context.Context, key string) ([]byte, uint64, error) {
	if !validKey(key) {
		return nil, 0, jetstream.ErrInvalidKey
	}
	var resp msgGetResponse
	err := a.requestOnce(ctx, "$JS.API.STREAM.MSG.GET.KV_"+a.cfg.bucket,
		map[string]string{"last_by_subj": a.keySubject(key)}, &resp)
	if isCode(err, codeNoMessage) {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	op, err := kvOperation(resp.Message.Header)
	if err != nil {
		return nil, 0, fmt.Errorf("the index entry %s has headers that do not parse: %w", key, err)
	}
	if op == "DEL" || op == "PURGE" {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	return resp.Message.Data, resp.Message.Seq, nil
}

// kvOperation is the KV-Operation header of a stored message ("" for a
// put).
func kvOperation(hdr []byte) (string, error) {
	if len(hdr) == 0 {
		return "", nil
	}
	h, err := nats.DecodeHeadersMsg(hdr)
	if err != nil {
		return "", err
	}
	return h.Get("KV-Operation"), nil
}

// validKey is the KV key rule: tokens of letters, digits, - _ / = and dots
// between them, never empty.
func validKey(key string) bool {
	if key == "" || key[0] == '.' || key[len(key)-1] == '.' {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '/' || c == '=':
		case c == '.':
			if key[i-1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}
