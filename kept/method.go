package kept

// The restore methods (Request.Method). changes.md defines them:
//
//   - full: set the whole live data aside, remove it, restore the point;
//     exact for every message; over live data the stream's last sequence
//     is bumped past the live one.
//   - delta: the point is a prefix of the live stream: set aside only the
//     messages after the point's last sequence (with the config and the
//     positions that change), delete them, set the config and the module's
//     consumers back; the last sequence never goes back.
//   - logical: a KV bucket or object store: write the point's value of
//     each key that differs as a new revision (a delete marker where the
//     point had none); nothing is removed, watchers see it.
//   - auto (the default): delta where it is exact and cheaper, else full;
//     never logical.
const (
	MethodAuto    = "auto"
	MethodFull    = "full"
	MethodDelta   = "delta"
	MethodLogical = "logical"
)

// Methods is every restore method, as on the wire.
var Methods = [...]string{MethodAuto, MethodFull, MethodDelta, MethodLogical}

// DownstreamLeave is Request.Downstream's one value: restore a stream that
// others mirror or source with the full method all the same, leaving them
// to be repaired (the reply says how).
const DownstreamLeave = "leave"

// checkMethod is the rule of method and downstream.
func checkMethod(r Request) error {
	if r.Method != "" {
		ok := false
		for _, m := range Methods {
			ok = ok || r.Method == m
		}
		if !ok {
			return Errorf(ErrBadRequest, "method %q is none of auto, full, delta and logical", clip(r.Method))
		}
	}
	if r.Downstream != "" && r.Downstream != DownstreamLeave {
		return Errorf(ErrBadRequest, "downstream %q is not \"leave\", its one value", clip(r.Downstream))
	}
	return nil
}

// MethodOf is the method r asks for: auto unless it names one.
func MethodOf(r Request) string {
	if r.Method == "" {
		return MethodAuto
	}
	return r.Method
}

// SeqState is a stream's state as a diff compares it.
type SeqState struct {
	FirstSeq uint64 `json:"first-seq"`
	LastSeq  uint64 `json:"last-seq"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
}

// StreamChange is one stream of a kept data: what it gained, lost and
// changed since a point (diff-kept, and a restore's dry run and reply),
// and, in a restore, the method it got and why.
type StreamChange struct {
	Stream string `json:"stream"`
	// Kind is what the stream holds: "kv", "object-store" or "stream".
	Kind string    `json:"kind,omitempty"`
	Then *SeqState `json:"then,omitempty"` // the point's state
	Now  *SeqState `json:"now,omitempty"`  // the live state; nil: the stream is not on the bus
	// Appended is how many live messages came after the point's last
	// sequence; Removed how many of the point's messages are no longer
	// live.
	Appended uint64 `json:"appended"`
	Removed  uint64 `json:"removed"`
	// AppendedSeqs and RemovedSeqs name them, as ranges "a-b" or "n",
	// at most the request's limit of each; SeqsCut says some were left
	// out (ask again with after).
	AppendedSeqs []string `json:"appended-seqs,omitempty"`
	RemovedSeqs  []string `json:"removed-seqs,omitempty"`
	SeqsCut      bool     `json:"seqs-cut,omitempty"`
	// Config names the configuration fields that changed.
	Config []string `json:"config-changed,omitempty"`
	// Keys (a KV bucket) and Objects (an object store) say what was
	// added, changed and deleted.
	Keys    *KeyChanges `json:"keys,omitempty"`
	Objects *KeyChanges `json:"objects,omitempty"`

	// restore-kept: the method this stream gets, and why.
	Method string `json:"method,omitempty"`
	Why    string `json:"why,omitempty"`
	// Expired is how many of the point's messages the stream's limits
	// (max-age, per-message TTL) remove as soon as it is restored.
	Expired uint64 `json:"expired,omitempty"`
	// BumpedTo is, for a full restore over live data, the last sequence
	// the restored stream starts at (past the live one), so that no
	// sequence is reused; 0 when it was not bumped.
	BumpedTo uint64 `json:"bumped-to,omitempty"`
	// Downstream names the streams that mirror or source this one, and
	// what the restore means for them.
	Downstream []Downstream `json:"downstream,omitempty"`
	// LiveConsumers names the live consumers on the stream that are not
	// the module's durable ones (watchers, ordered and ephemeral
	// consumers), and what the method means for them.
	LiveConsumers []LiveConsumer `json:"live-consumers,omitempty"`
}

// KeyChanges counts, and names up to a limit, the keys (or objects) a
// bucket gained, changed and lost since a point.
type KeyChanges struct {
	Added   int      `json:"added"`
	Changed int      `json:"changed"`
	Deleted int      `json:"deleted"`
	Names   []string `json:"names,omitempty"` // "+key", "~key", "-key", at most the request's limit
	Cut     bool     `json:"cut,omitempty"`   // some names were left out (ask again with after)
}

// ConsumerChange is one of the module's consumers: its position at the
// point and now.
type ConsumerChange struct {
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	Then     uint64 `json:"then"`           // ack floor at the point
	Now      uint64 `json:"now"`            // ack floor now
	Gone     bool   `json:"gone,omitempty"` // not on the bus now
	New      bool   `json:"new,omitempty"`  // not in the point
}

// Downstream is a stream that mirrors or sources a stream a restore
// restores.
type Downstream struct {
	Stream string `json:"stream"`
	Kind   string `json:"kind"` // "mirror" or "source"
	// Effect is what the restore's method means for it, and how to
	// repair it where it goes wrong.
	Effect string `json:"effect,omitempty"`
}

// LiveConsumer is a live consumer on a restored stream that is not one of
// the module's durable consumers.
type LiveConsumer struct {
	Consumer string `json:"consumer"`
	Kind     string `json:"kind"`           // "ordered", "ephemeral" or "durable"
	Sees     string `json:"sees,omitempty"` // what the method means for it
}

// clip is s cut to 32 bytes for a sentence that quotes it.
func clip(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
