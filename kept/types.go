package kept

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Request is a verb's request, as it travels on the wire (kebab-case keys).
type Request struct {
	Module      string `json:"module,omitempty"`      // the module (a plain name); every verb but list-kept and prune-kept needs it
	Local       string `json:"local,omitempty"`       // the kept data of the module (a plain name)
	Form        int    `json:"form,omitempty"`        // the version of the kept data's shape the point is taken at (0 to MaxForm)
	Fingerprint string `json:"fingerprint,omitempty"` // the change the point protects against (a plain name)
	CatchUp     string `json:"catch-up,omitempty"`    // snapshot-kept: the tool that brings data at Form up to the next form, handed back by a restore
	From        string `json:"from,omitempty"`        // restore-kept: a point's directory or aside/<id> instead of Form and Fingerprint; discard-aside: the aside id
	AsideOnly   bool   `json:"aside-only,omitempty"`  // restore-kept: only set the live data aside and remove it, restoring nothing
	Caller      string `json:"caller,omitempty"`      // who asks, as the request claims it: recorded with the act as caller
	Why         string `json:"why,omitempty"`         // why, recorded with the act; required by restore-kept and discard-aside
	DryRun      bool   `json:"dry-run,omitempty"`     // restore-kept and prune-kept: say exactly what would be done, and change nothing
	// KeepFor, for snapshot-kept, protects the point from prune-kept for
	// that long after it is taken (its keep-until).
	KeepFor Duration `json:"keep-for,omitempty"`
	// Policy, for prune-kept, is the policy to apply; without it the
	// recorded policy (policy.<module>.<local>, else policy.default) is.
	Policy *Policy `json:"policy,omitempty"`
	// Streams and Consumers, for set-plan, are the plan of module/local:
	// the streams its kept data is made of (1 to MaxPlanStreams), and the
	// durable consumers, on any stream, that belong to it whatever their
	// names say (at most MaxPlanConsumers).
	Streams   []string       `json:"streams,omitempty"`
	Consumers []PlanConsumer `json:"consumers,omitempty"`
	// Replicas, PlacementCluster and PlacementTags, for restore-kept,
	// change the configuration of the streams it restores from the point
	// (see Overrides).
	Replicas         int      `json:"replicas,omitempty"`
	PlacementCluster string   `json:"placement-cluster,omitempty"`
	PlacementTags    []string `json:"placement-tags,omitempty"`
	// Limit and After, for list-kept, ask for one page: at most Limit
	// points and asides (0: DefaultListLimit; at most MaxListLimit), those
	// after the cursor After (the Next of the page before; "": from the
	// first). For diff-kept, Limit bounds each list of names and
	// sequences (0: DefaultDiffLimit; at most MaxDiffLimit) and After is
	// a DiffCursor's text (see diff.go).
	Limit int    `json:"limit,omitempty"`
	After string `json:"after,omitempty"`
	// Method, for restore-kept, is the restore method: auto (the
	// default), full, delta or logical (see method.go).
	Method string `json:"method,omitempty"`
	// Downstream, for restore-kept, is "leave" to restore with the full
	// method a stream that other streams mirror or source.
	Downstream string `json:"downstream,omitempty"`
	// Capture, for capture-kept, is "on" or "off"; Settings, with "on",
	// how the kept data is captured (zero fields: the defaults).
	Capture  string           `json:"capture,omitempty"`
	Settings *CaptureSettings `json:"settings,omitempty"`
	// At and AtSeq, for restore-kept, restore the kept data as it was at a
	// moment of its captured window: a time (RFC 3339), or per stream the
	// last sequence to hold (see capture.go).
	At    string            `json:"at,omitempty"`
	AtSeq map[string]uint64 `json:"at-seq,omitempty"`
	// BusIdentity is who asked as the bus says it (verbs.Service sets it
	// from the request's Nats-Request-Info header, else the keeper's own
	// connection); acts record it beside Caller. It is never read from a
	// request's JSON.
	BusIdentity *BusIdentity `json:"-"`
}

// Overrides change the configuration of the streams a restore re-creates
// from a point, as `nats backup restore stream --replicas --cluster --tag`
// does: Replicas (when above 0) replaces each stream's replicas, and a
// Cluster or Tags replace its whole placement. Consumers with replicas of
// their own above the new stream's are lowered to it (the server refuses a
// consumer with more replicas than its stream); the others follow their
// stream. A restore that puts an aside back never changes its streams.
type Overrides struct {
	Replicas int      `json:"replicas,omitempty"`
	Cluster  string   `json:"placement-cluster,omitempty"`
	Tags     []string `json:"placement-tags,omitempty"`
}

// OverridesOf are the overrides a request asks for, or nil.
func OverridesOf(r Request) *Overrides {
	if r.Replicas == 0 && r.PlacementCluster == "" && len(r.PlacementTags) == 0 {
		return nil
	}
	return &Overrides{Replicas: r.Replicas, Cluster: r.PlacementCluster, Tags: r.PlacementTags}
}

// String is the overrides as the dry run and the acts say them.
func (o *Overrides) String() string {
	if o == nil {
		return "none"
	}
	var parts []string
	if o.Replicas > 0 {
		parts = append(parts, fmt.Sprintf("replicas %d", o.Replicas))
	}
	if o.Cluster != "" {
		parts = append(parts, "placement cluster "+o.Cluster)
	}
	if len(o.Tags) > 0 {
		parts = append(parts, "placement tags "+strings.Join(o.Tags, ", "))
	}
	return strings.Join(parts, ", ")
}

// Reply is a verb's success reply. Said is always set.
type Reply struct {
	Said      string        `json:"said"`                // one sentence a person can read: what was done, and what was not
	Point     *Point        `json:"point,omitempty"`     // the point taken, restored, verified or named
	Aside     *Aside        `json:"aside,omitempty"`     // the aside made (restore-kept, a replaced point) or discarded
	Dir       string        `json:"dir,omitempty"`       // where the point or aside lives, in the store
	CatchUp   string        `json:"catch-up,omitempty"`  // the point's catch-up tool: what to run after a restore
	Positions []Position    `json:"positions,omitempty"` // the consumer positions recorded (snapshot-kept) or set back (restore-kept)
	Moves     []Move        `json:"moves,omitempty"`     // every consumer a restore set back, from where to where
	Plan      *RestorePlan  `json:"plan,omitempty"`      // restore-kept: what it did, or with dry-run what it would do
	Points    []Point       `json:"points,omitempty"`    // list-kept: the points
	Asides    []Aside       `json:"asides,omitempty"`    // list-kept: the asides
	Report    *VerifyReport `json:"report,omitempty"`    // verify-kept: what was checked
	// Totals, TotalBytes and Waiting are list-kept's: the points and asides
	// of each kept data with their bytes, the bytes of all, and the ids of
	// the asides older than the keeper's warning age.
	Totals     []KeptTotal `json:"totals,omitempty"`
	TotalBytes int64       `json:"total-bytes,omitempty" was:"total_bytes"`
	Waiting    []string    `json:"waiting,omitempty"`
	// Total and Next are list-kept's pages: how many points and asides the
	// listing holds in all pages, and the cursor to ask for the next page
	// with (Request.After); "" on the last page. Totals, TotalBytes and
	// Waiting cover the points and asides of this page.
	Total int    `json:"total,omitempty"`
	Next  string `json:"next,omitempty"`
	// Schedules is list-kept's (its first page): the schedules of what it
	// lists, with each one's next due time.
	Schedules []Scheduled `json:"schedules,omitempty"`
	// Cut, when set, says what this reply left out to stay under the
	// connection's max payload, and where the whole is (see BoundReply).
	Cut *ReplyCut `json:"cut,omitempty"`
	// Pruned is prune-kept's: every point it looked at, kept or removed,
	// with the rules that kept it.
	Pruned []PruneDecision `json:"pruned,omitempty"`
	// KeptPlan is the plan that set-plan recorded, or that show-plan found.
	KeptPlan *Plan `json:"kept-plan,omitempty"`
	// Evidence is restore-kept's evidence report (not on a dry run), and
	// what show-evidence read back.
	Evidence *Evidence `json:"evidence,omitempty"`
	// Streams is diff-kept's, and restore-kept's: per stream what the live
	// data gained, lost and changed since the point, and (restore-kept)
	// the method it got and why.
	Streams []StreamChange `json:"streams,omitempty"`
	// Consumers is diff-kept's: each of the module's consumers, its
	// position at the point and now.
	Consumers []ConsumerChange `json:"consumers,omitempty"`
	// Capture is capture-kept's: the kept data's capture as it stands;
	// Captures is list-kept's, of each captured kept data it lists.
	Capture  *CaptureInfo  `json:"capture,omitempty"`
	Captures []CaptureInfo `json:"captures,omitempty"`
	// PositionsAge is a restore to a moment's: how long before the moment
	// the consumer positions it set back were sampled, in milliseconds.
	PositionsAgeMS *int64 `json:"positions-age-ms,omitempty"`
	// TookMS is how long the verb took, in milliseconds (diff-kept).
	TookMS int64 `json:"took-ms,omitempty"`
}

// KeptTotal is what one kept data has kept: its points and asides and
// their archives' bytes.
type KeptTotal struct {
	Module     string `json:"module"`                        // the module
	Local      string `json:"local"`                         // the kept data
	Points     int    `json:"points"`                        // how many restore points
	PointBytes int64  `json:"point-bytes" was:"point_bytes"` // their archives' bytes
	Asides     int    `json:"asides"`                        // how many asides
	AsideBytes int64  `json:"aside-bytes" was:"aside_bytes"` // their archives' bytes
}

// Position is where one of a module's durable consumers stood.
type Position struct {
	Stream   string          `json:"stream"`                    // the stream the consumer is on
	Consumer string          `json:"consumer"`                  // the durable consumer's name
	AckFloor uint64          `json:"ack-floor" was:"ack_floor"` // stream sequence acknowledged up to
	Config   json.RawMessage `json:"config"`                    // the consumer configuration as the server holds it
}

// How a consumer is set back by a restore.
const (
	MoveWithStream = "with-stream" // it comes back with its stream's snapshot, as the snapshot holds it
	MoveReset      = "reset"       // the live consumer is moved, its configuration kept
	MoveCreate     = "create"      // it no longer existed: made again from its recorded configuration
	MoveLeft       = "left-alone"  // recorded, but no longer the module's: not moved
)

// Move is one consumer a restore sets back: from where it stood (nil when it
// did not exist) to the ack floor the point recorded.
type Move struct {
	Stream   string  `json:"stream"`         // the stream the consumer is on
	Consumer string  `json:"consumer"`       // the durable consumer's name
	From     *uint64 `json:"from,omitempty"` // ack floor before the restore
	To       uint64  `json:"to"`             // ack floor after it
	By       string  `json:"by"`             // how: MoveWithStream, MoveReset, MoveCreate or MoveLeft
}

// String says the move in words: "<consumer> on <stream> from ack floor
// <from> to <to>".
func (m Move) String() string {
	from := "absent"
	if m.From != nil {
		from = fmt.Sprint(*m.From)
	}
	s := fmt.Sprintf("%s on %s from ack floor %s to %d", m.Consumer, m.Stream, from, m.To)
	if m.By == MoveWithStream {
		s += " (with its stream)"
	}
	return s
}

// Plan is an explicit list of the streams that make up one kept data,
// recorded as plan.<module>.<local> in the index; it wins over the naming
// rule. Its JSON, as recorded and as set-plan and show-plan carry it:
//
//	{"module": "billing", "local": "ledger",
//	 "streams": ["LEDGER_EVENTS", "KV_billing_ledger"],
//	 "consumers": [{"stream": "ORDERS", "consumer": "ledger-feed"}]}
//
// Module and Local repeat the key's names; Streams are 1 to
// MaxPlanStreams stream names (CheckStreamName), each once; Consumers
// (optional, at most MaxPlanConsumers) name durable consumers by stream and
// name. A plan may not name the keeper's own streams or a stream of another
// kept data (SetPlan).
type Plan struct {
	Module  string   `json:"module"`  // the module, as in the key
	Local   string   `json:"local"`   // the kept data, as in the key
	Streams []string `json:"streams"` // the streams the kept data is made of, each once
	// Consumers are durable consumers, on any stream, that belong to this
	// kept data whatever their names say.
	Consumers []PlanConsumer `json:"consumers,omitempty"`
	Format    int            `json:"format,omitempty"` // the record's format (RecordFormat when written; 0: older, read as 1)
}

// StreamSum is one stream of a point or aside as the archive manifest has it.
type StreamSum struct {
	Name      string `json:"name"`                      // the stream
	Messages  uint64 `json:"messages"`                  // messages it held
	Bytes     uint64 `json:"bytes"`                     // bytes it held
	FirstSeq  uint64 `json:"first-seq" was:"first_seq"` // its first sequence
	LastSeq   uint64 `json:"last-seq" was:"last_seq"`   // its last sequence
	Consumers int    `json:"consumers"`                 // consumers its snapshot carries
	// Base and TailAfter mark an aside's stream that holds only a tail:
	// the messages after sequence TailAfter, the last of the stream in
	// point Base (its key prefix), which holds the rest. A delta restore
	// sets such a tail aside; it is never a whole stream.
	Base      string `json:"base,omitempty"`
	TailAfter uint64 `json:"tail-after,omitempty"`
	// Logical marks an aside's stream that a logical restore set aside: it
	// holds only the live last messages of the keys (objects) the restore
	// overwrote, and Absent names those it overwrote that had no live
	// message. It puts back only logically (a new revision per key, a
	// delete marker for each of Absent); it is never a whole stream.
	Logical bool     `json:"logical,omitempty"`
	Absent  []string `json:"absent,omitempty"`
	// KeyIndex is the key index of a point's KV bucket or object store,
	// written beside its archive at snapshot-kept: a logical restore reads
	// the index and only the archive's bytes that hold the values it
	// writes. Absent when the point has none (older points, imports,
	// asides, an index over its bounds): it reads the archive whole.
	KeyIndex *KeyIndex `json:"key-index,omitempty"`
}

// KeyIndex names a stream's key index: an object in the point's directory
// (keys-<stream>.idx, or keys-<stream>.idx.age encrypted as the point's
// archive is), its size and its checksum as stored (the store's Checksum,
// hex, as archive-sum is).
type KeyIndex struct {
	Object string `json:"object"`
	Size   int64  `json:"size"`
	Sum    string `json:"sum"`
}

// Point is a restore point: point.json, and the value of
// point.<module>.<local>.<form>.<fingerprint> in `kept`.
type Point struct {
	Module      string      `json:"module"`               // the module
	Local       string      `json:"local"`                // the kept data
	Form        int         `json:"form"`                 // the form it was taken at
	Fingerprint string      `json:"fingerprint"`          // the change it protects against
	CatchUp     string      `json:"catch-up,omitempty"`   // the tool to run after restoring it
	Taken       time.Time   `json:"taken"`                // when it was taken (UTC)
	KeepUntil   *time.Time  `json:"keep-until,omitempty"` // set at snapshot (keep-for): prune keeps the point until then, whatever the policy
	Caller      string      `json:"caller,omitempty"`     // who asked
	Why         string      `json:"why,omitempty"`        // why
	Dir         string      `json:"dir"`                  // its key prefix in the store (points/<module>/<local>/f<form>-<fingerprint>)
	Streams     []StreamSum `json:"streams"`              // each stream as the archive holds it
	// Positions are the module's consumers' positions, read before the
	// streams. point.json holds them all; the index record holds none
	// (records made before this held them too), only PositionCount.
	Positions []Position `json:"positions,omitempty"`
	// PositionCount is how many positions point.json holds (0 in records
	// made before it was kept: then len(Positions) is the count).
	PositionCount int   `json:"position-count,omitempty" was:"position_count"`
	ArchiveSize   int64 `json:"archive-size" was:"archive_size"` // the stored archive's bytes (the ciphertext, when encrypted)
	// ArchiveSum is the archive's checksum as the store computed it when it
	// was committed (store.Checksum), of the bytes stored (the ciphertext,
	// when encrypted, so a copy is checked without the key); empty for
	// points taken before stores.
	ArchiveSum string `json:"archive-sum,omitempty" was:"archive_sum"`
	// Format is the record's format (RecordFormat when written; 0 in
	// records of keepers before formats, read as 1), and WrittenBy the
	// version of the keeper that took the point (format.go).
	Format    int    `json:"format,omitempty"`
	WrittenBy string `json:"written-by,omitempty"`
	// At, on a point made by a restore to a moment, is that moment, and
	// Base the base point its chain of captured segments extends. On a
	// full point taken by snapshot-kept (not a capture's base), At is its
	// cut: each stream holds the messages stamped at or before it.
	At   *time.Time `json:"at,omitempty"`
	Base string     `json:"base,omitempty"`
	// Incremental, on a point taken while its kept data was captured, says
	// the point is its base (Base) plus the capture's segments up to
	// Through, as the kept data was at At: it has no archive of its own;
	// a verb that reads its archive makes the point of that moment first.
	Incremental bool   `json:"incremental,omitempty"`
	Through     uint64 `json:"through,omitempty"`
	Sealing
}

// Sealing says how a point's or an aside's archive is stored: absent for a
// plain bus.tar, else the object's name and to whom it is encrypted.
type Sealing struct {
	// Archive is the archive's object name in Dir: bus.tar.age when
	// encrypted; empty means bus.tar.
	Archive string `json:"archive,omitempty"`
	// Encrypted, when set, says the archive is an age file.
	Encrypted *Encryption `json:"encrypted,omitempty"`
}

// Encryption describes an encrypted archive (serve --encrypt-to).
type Encryption struct {
	Format     string   `json:"format"`     // "age" (age-encryption.org/v1, X25519 recipients)
	Recipients []string `json:"recipients"` // the public keys (age1…) it is encrypted to
	// PlainSize is the plain bus.tar's bytes inside (ArchiveSize is the
	// ciphertext's). The plaintext's own integrity is the manifest's: every
	// entry's size and SHA-256, and the manifest's seal.
	PlainSize int64 `json:"plain-size" was:"plain_size"`
}

// Aside is a set-aside copy: aside.json, and the value of aside.<id> in `kept`.
type Aside struct {
	ID      string      `json:"id"`               // <module>.<local>.<UTC yyyymmddThhmmss>, made unique if taken
	Module  string      `json:"module"`           // the module
	Local   string      `json:"local"`            // the kept data
	Taken   time.Time   `json:"taken"`            // when it was set aside (UTC)
	Caller  string      `json:"caller,omitempty"` // who asked
	Why     string      `json:"why,omitempty"`    // why
	Reason  string      `json:"reason"`           // "restore" or "aside-only"
	Point   string      `json:"point,omitempty"`  // the point restored in its place, if any
	Dir     string      `json:"dir"`              // its key prefix in the store (aside/<id>)
	Streams []StreamSum `json:"streams"`          // each stream as the archive holds it
	// Positions are the consumers' positions when it was set aside:
	// aside.json holds them all, the index record none (as Point's).
	Positions     []Position `json:"positions,omitempty"`
	PositionCount int        `json:"position-count,omitempty" was:"position_count"` // as Point.PositionCount
	ArchiveSize   int64      `json:"archive-size" was:"archive_size"`               // as Point.ArchiveSize
	ArchiveSum    string     `json:"archive-sum,omitempty" was:"archive_sum"`       // as Point.ArchiveSum
	Format        int        `json:"format,omitempty"`                              // as Point.Format
	// Incremental, Base, Through and At, on the aside of an incremental
	// point (set aside when a point of the same form and fingerprint
	// replaced it), are the point's: it has no archive of its own, and
	// is its base plus the capture's segments up to Through, as the kept
	// data was at At.
	Incremental bool       `json:"incremental,omitempty"`
	Base        string     `json:"base,omitempty"`
	Through     uint64     `json:"through,omitempty"`
	At          *time.Time `json:"at,omitempty"`
	Sealing
}

// RestorePlan is exactly what a restore-kept would do; dry-run replies with it.
type RestorePlan struct {
	Point        string     `json:"point,omitempty"`      // point directory, relative
	SetAside     []string   `json:"set-aside"`            // live streams to snapshot into the aside
	Remove       []string   `json:"remove"`               // live streams to delete after that
	Restore      []string   `json:"restore"`              // streams to restore from the point
	Reposition   []Position `json:"reposition"`           // consumers to set back on streams the point does not carry
	Moves        []Move     `json:"moves"`                // every consumer set back, with its old and new position
	Foreign      []Move     `json:"left-alone,omitempty"` // recorded consumers that are no longer the module's: not moved
	Unplaced     []Position `json:"unplaced,omitempty"`   // recorded positions on streams that no longer exist
	AsideBytes   uint64     `json:"aside-bytes"`          // live bytes that will be set aside
	RestoreBytes uint64     `json:"restore-bytes"`        // bytes the point holds
	AsideOnly    bool       `json:"aside-only,omitempty"` // an aside-only request: nothing is restored
	Overrides    *Overrides `json:"overrides,omitempty"`  // what the restored streams' configuration changes
}

// VerifyReport is verify-kept's report of a point that verifies: what was
// checked. A point that does not verify is no report but a failure (an
// error of ErrFailed, a *DamagedError, whose sentence lists every problem).
type VerifyReport struct {
	Point   string      `json:"point"`   // the point's directory
	Streams []StreamSum `json:"streams"` // each stream as its manifest has it
	Bytes   int64       `json:"bytes"`   // the archive's bytes, every one of them read and checked
}

// PlanConsumer names one durable consumer a plan declares its kept data's own.
type PlanConsumer struct {
	Stream   string `json:"stream"`   // the stream the consumer is on
	Consumer string `json:"consumer"` // the durable consumer's name
}

// DefaultLeaseTTL is how long a lease lives unless renewed. A verb renews its
// lease every third of it; a keeper that dies leaves a lease that expires.
const DefaultLeaseTTL = 30 * time.Second

// StreamSumNames is the names of ss, in their order.
func StreamSumNames(ss []StreamSum) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}
