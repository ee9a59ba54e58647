package keeper

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// What a consumer the restore sets back must be, planned with the restore
// (planPositions) and checked once it is done (checkConsumers): its ack
// floor and the sum of its configuration.

// expectConsumer is what one consumer the restore sets back must be once
// it is done: its ack floor, and the configuration it must have (configSum):
// a consumer moved (reset) keeps the live one's; one made again, or one
// that comes back with its stream, has the recorded one.
func expectConsumer(mv Move, pos Position, live *Position, ov *Overrides) ConsumerFigures {
	c := ConsumerFigures{Stream: mv.Stream, Consumer: mv.Consumer, By: mv.By, WantFloor: pos.AckFloor}
	cfg := pos.Config
	if mv.By == MoveReset && live != nil {
		cfg = live.Config
	}
	c.WantConfig = configSum(cfg, mv.By == MoveWithStream && ov != nil)
	return c
}

// configSum is the SHA-256 of a consumer configuration with its keys
// sorted, without the server's own metadata (keys beginning "_nats.",
// which a server sets on every create), and without num_replicas when
// ignoreReplicas (a restore whose overrides change its stream's replicas
// may lower its consumers').
func configSum(raw json.RawMessage, ignoreReplicas bool) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		h := sha256.Sum256(raw)
		return hex.EncodeToString(h[:])
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		for k := range md {
			if strings.HasPrefix(k, "_nats.") {
				delete(md, k)
			}
		}
		if len(md) == 0 {
			delete(m, "metadata")
		}
	}
	if ignoreReplicas {
		delete(m, "num_replicas")
	}
	b, _ := json.Marshal(m)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
