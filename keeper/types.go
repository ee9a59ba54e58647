package keeper

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Request is a verb's request, as it travels on the wire (kebab-case keys).
type Request struct {
	Module      string `json:"module,omitempty"`
	Local       string `json:"local,omitempty"`
	Form        int    `json:"form,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
	CatchUp     string `json:"catch-up,omitempty"`
	From        string `json:"from,omitempty"`
	AsideOnly   bool   `json:"aside-only,omitempty"`
	Caller      string `json:"caller,omitempty"`
	Why         string `json:"why,omitempty"`
	DryRun      bool   `json:"dry-run,omitempty"`
	// KeepFor, for snapshot-kept, protects the point from prune-kept for
	// that long after it is taken (its keep-until).
	KeepFor Duration `json:"keep-for,omitempty"`
	// Policy, for prune-kept, is the policy to apply; without it the
	// recorded policy (policy.<module>.<local>, else policy.default) is.
	Policy *Policy `json:"policy,omitempty"`
	// Replicas, PlacementCluster and PlacementTags, for restore-kept,
	// change the configuration of the streams it restores from the point
	// (see Overrides).
	Replicas         int      `json:"replicas,omitempty"`
	PlacementCluster string   `json:"placement-cluster,omitempty"`
	PlacementTags    []string `json:"placement-tags,omitempty"`
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
	Said      string        `json:"said"`
	Point     *Point        `json:"point,omitempty"`
	Aside     *Aside        `json:"aside,omitempty"`
	Dir       string        `json:"dir,omitempty"`
	CatchUp   string        `json:"catch-up,omitempty"`
	Positions []Position    `json:"positions,omitempty"`
	Moves     []Move        `json:"moves,omitempty"`
	Plan      *RestorePlan  `json:"plan,omitempty"`
	Points    []Point       `json:"points,omitempty"`
	Asides    []Aside       `json:"asides,omitempty"`
	Report    *VerifyReport `json:"report,omitempty"`
	// Totals, TotalBytes and Waiting are list-kept's: the points and asides
	// of each kept data with their bytes, the bytes of all, and the ids of
	// the asides older than the keeper's warning age.
	Totals     []KeptTotal `json:"totals,omitempty"`
	TotalBytes int64       `json:"total_bytes,omitempty"`
	Waiting    []string    `json:"waiting,omitempty"`
	// Pruned is prune-kept's: every point it looked at, kept or removed,
	// with the rules that kept it.
	Pruned []PruneDecision `json:"pruned,omitempty"`
	Extra  json.RawMessage `json:"extra,omitempty"`
}

// KeptTotal is what one kept data has kept: its points and asides and
// their archives' bytes.
type KeptTotal struct {
	Module     string `json:"module"`
	Local      string `json:"local"`
	Points     int    `json:"points"`
	PointBytes int64  `json:"point_bytes"`
	Asides     int    `json:"asides"`
	AsideBytes int64  `json:"aside_bytes"`
}

// Position is where one of a module's durable consumers stood.
type Position struct {
	Stream   string          `json:"stream"`
	Consumer string          `json:"consumer"`
	AckFloor uint64          `json:"ack_floor"` // stream sequence acknowledged up to
	Config   json.RawMessage `json:"config"`    // the consumer configuration as the server holds it
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
	Stream   string  `json:"stream"`
	Consumer string  `json:"consumer"`
	From     *uint64 `json:"from,omitempty"` // ack floor before the restore
	To       uint64  `json:"to"`             // ack floor after it
	By       string  `json:"by"`
}

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
// recorded as plan.<module>.<local>; it wins over the naming rule.
type Plan struct {
	Module  string   `json:"module"`
	Local   string   `json:"local"`
	Streams []string `json:"streams"`
	// Consumers are durable consumers, on any stream, that belong to this
	// kept data whatever their names say.
	Consumers []PlanConsumer `json:"consumers,omitempty"`
}

// StreamSum is one stream of a point or aside as the archive manifest has it.
type StreamSum struct {
	Name      string `json:"name"`
	Messages  uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Consumers int    `json:"consumers"`
}

// Point is a restore point: point.json, and the value of
// point.<module>.<local>.<form>.<fingerprint> in `kept`.
type Point struct {
	Module      string      `json:"module"`
	Local       string      `json:"local"`
	Form        int         `json:"form"`
	Fingerprint string      `json:"fingerprint"`
	CatchUp     string      `json:"catch-up,omitempty"`
	Taken       time.Time   `json:"taken"`
	KeepUntil   *time.Time  `json:"keep-until,omitempty"` // set at snapshot (keep-for): prune keeps the point until then, whatever the policy
	Caller      string      `json:"caller,omitempty"`
	Why         string      `json:"why,omitempty"`
	Dir         string      `json:"dir"` // its key prefix in the store (points/<module>/<local>/f<form>-<fingerprint>)
	Streams     []StreamSum `json:"streams"`
	Positions   []Position  `json:"positions"`
	ArchiveSize int64       `json:"archive_size"`
	// ArchiveSum is the archive's checksum as the store computed it when it
	// was committed (store.Checksum); empty for points taken before stores.
	ArchiveSum string `json:"archive_sum,omitempty"`
}

// Aside is a set-aside copy: aside.json, and the value of aside.<id> in `kept`.
type Aside struct {
	ID          string      `json:"id"`
	Module      string      `json:"module"`
	Local       string      `json:"local"`
	Taken       time.Time   `json:"taken"`
	Caller      string      `json:"caller,omitempty"`
	Why         string      `json:"why,omitempty"`
	Reason      string      `json:"reason"`          // "restore" or "aside-only"
	Point       string      `json:"point,omitempty"` // the point restored in its place, if any
	Dir         string      `json:"dir"`             // its key prefix in the store (aside/<id>)
	Streams     []StreamSum `json:"streams"`
	Positions   []Position  `json:"positions"`
	ArchiveSize int64       `json:"archive_size"`
	ArchiveSum  string      `json:"archive_sum,omitempty"` // as Point.ArchiveSum
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
	AsideOnly    bool       `json:"aside-only,omitempty"`
	Overrides    *Overrides `json:"overrides,omitempty"` // what the restored streams' configuration changes
}

// VerifyReport is verify-kept's readable report.
type VerifyReport struct {
	Point    string      `json:"point"`
	OK       bool        `json:"ok"`
	Streams  []StreamSum `json:"streams"`
	Bytes    int64       `json:"bytes"`
	Problems []string    `json:"problems,omitempty"`
}
