package keeper

import (
	"context"
	"time"

	"github.com/nats-keeper/nats-keeper/kept"
)

// The wire contract lives in package kept (requests, replies, points,
// asides, evidence, policy, error kinds, request checks, reply bounds, verb
// names). These aliases keep its names short inside the engine and keep
// keeper.X working for callers not yet moved to kept.X; new code outside
// keeper names kept directly.

type (
	Act             = kept.Act
	ArchiveFigures  = kept.ArchiveFigures
	Aside           = kept.Aside
	BusIdentity     = kept.BusIdentity
	Check           = kept.Check
	ConsumerFigures = kept.ConsumerFigures
	CutList         = kept.CutList
	DamagedError    = kept.DamagedError
	Duration        = kept.Duration
	Encryption      = kept.Encryption
	Evidence        = kept.Evidence
	EvidenceError   = kept.EvidenceError
	KeptTotal       = kept.KeptTotal
	Move            = kept.Move
	Overrides       = kept.Overrides
	Plan            = kept.Plan
	PlanConsumer    = kept.PlanConsumer
	Point           = kept.Point
	Policy          = kept.Policy
	Position        = kept.Position
	Progress        = kept.Progress
	PruneDecision   = kept.PruneDecision
	Reply           = kept.Reply
	ReplyCut        = kept.ReplyCut
	Request         = kept.Request
	RestorePlan     = kept.RestorePlan
	Schedule        = kept.Schedule
	Scheduled       = kept.Scheduled
	Sealing         = kept.Sealing
	StepTime        = kept.StepTime
	StreamCount     = kept.StreamCount
	StreamFigures   = kept.StreamFigures
	StreamSum       = kept.StreamSum
	SubjectFigures  = kept.SubjectFigures
	VerifyReport    = kept.VerifyReport
)

const (
	CheckAsideVerified  = kept.CheckAsideVerified
	CheckConsumers      = kept.CheckConsumers
	CheckKVKeys         = kept.CheckKVKeys
	CheckLogical        = kept.CheckLogical
	CheckNoWritesAfter  = kept.CheckNoWritesAfter
	CheckObjects        = kept.CheckObjects
	CheckPointVerified  = kept.CheckPointVerified
	CheckStreams        = kept.CheckStreams
	DefaultLeaseTTL     = kept.DefaultLeaseTTL
	DefaultListLimit    = kept.DefaultListLimit
	DefaultReplyBound   = kept.DefaultReplyBound
	Fail                = kept.Fail
	IdentityKeeper      = kept.IdentityKeeper
	IdentityRequestInfo = kept.IdentityRequestInfo
	MaxDuration         = kept.MaxDuration
	MaxForm             = kept.MaxForm
	MaxKeepCount        = kept.MaxKeepCount
	MaxKeptLen          = kept.MaxKeptLen
	MaxListLimit        = kept.MaxListLimit
	MaxNameLen          = kept.MaxNameLen
	MaxPathLen          = kept.MaxPathLen
	MaxPlanConsumers    = kept.MaxPlanConsumers
	MaxPlanStreams      = kept.MaxPlanStreams
	MaxReplicas         = kept.MaxReplicas
	MaxTagLen           = kept.MaxTagLen
	MaxTags             = kept.MaxTags
	MaxTextLen          = kept.MaxTextLen
	MinScheduleEvery    = kept.MinScheduleEvery
	MoveCreate          = kept.MoveCreate
	MoveLeft            = kept.MoveLeft
	MoveReset           = kept.MoveReset
	MoveWithStream      = kept.MoveWithStream
	NoRuleKeeps         = kept.NoRuleKeeps
	Pass                = kept.Pass
	ReasonAsideOnly     = kept.ReasonAsideOnly
	ReasonRecovery      = kept.ReasonRecovery
	ReasonReplaced      = kept.ReasonReplaced
	ReasonRestore       = kept.ReasonRestore
	ReplySample         = kept.ReplySample
	ScheduledPrefix     = kept.ScheduledPrefix
	VerbDiff            = kept.VerbDiff
	VerbDiscard         = kept.VerbDiscard
	VerbDiscardPoint    = kept.VerbDiscardPoint
	VerbImport          = kept.VerbImport
	VerbList            = kept.VerbList
	VerbPrune           = kept.VerbPrune
	VerbRemovePlan      = kept.VerbRemovePlan
	VerbRestore         = kept.VerbRestore
	VerbSetPlan         = kept.VerbSetPlan
	VerbShowEvidence    = kept.VerbShowEvidence
	VerbShowPlan        = kept.VerbShowPlan
	VerbSnapshot        = kept.VerbSnapshot
	VerbVerify          = kept.VerbVerify
)

var (
	ErrBadRequest  = kept.ErrBadRequest
	ErrBusy        = kept.ErrBusy
	ErrConflict    = kept.ErrConflict
	ErrCutShort    = kept.ErrCutShort
	ErrDamaged     = kept.ErrDamaged
	ErrDenied      = kept.ErrDenied
	ErrFailed      = kept.ErrFailed
	ErrLocked      = kept.ErrLocked
	ErrNoBus       = kept.ErrNoBus
	ErrNotFound    = kept.ErrNotFound
	ErrStaleStream = kept.ErrStaleStream
)

// Errorf is kept.Errorf.
func Errorf(kind error, format string, args ...any) error { return kept.Errorf(kind, format, args...) }

// KindOf is kept.KindOf.
func KindOf(err error) error { return kept.KindOf(err) }

// WithProgress is kept.WithProgress.
func WithProgress(ctx context.Context, fn func(Progress)) context.Context {
	return kept.WithProgress(ctx, fn)
}

// ValidName is kept.ValidName.
func ValidName(what, s string) error { return kept.ValidName(what, s) }

// CheckStreamName is kept.CheckStreamName.
func CheckStreamName(what, name string) error { return kept.CheckStreamName(what, name) }

// CheckRequest is kept.CheckRequest.
func CheckRequest(verb string, r Request) error { return kept.CheckRequest(verb, r) }

// ParseAsideID is kept.ParseAsideID.
func ParseAsideID(id string) (module, local string, err error) { return kept.ParseAsideID(id) }

// ParseDuration is kept.ParseDuration.
func ParseDuration(s string) (Duration, error) { return kept.ParseDuration(s) }

// DecodeEvidence is kept.DecodeEvidence.
func DecodeEvidence(data []byte) (*Evidence, error) { return kept.DecodeEvidence(data) }

// ListOf is kept.ListOf.
func ListOf(r Request) string { return kept.ListOf(r) }

// MergeList is kept.MergeList.
func MergeList(of string, pages []*Reply) *Reply { return kept.MergeList(of, pages) }

// CheckCursor is kept.CheckCursor.
func CheckCursor(after string) error { return kept.CheckCursor(after) }

// Decide is kept.Decide.
func Decide(points []Point, p Policy, now time.Time, protected map[string]string) []PruneDecision {
	return kept.Decide(points, p, now, protected)
}

// WithReplyBound is kept.WithReplyBound.
func WithReplyBound(ctx context.Context, n int) context.Context { return kept.WithReplyBound(ctx, n) }

// ReplyBound is kept.ReplyBound.
func ReplyBound(ctx context.Context) (int, bool) { return kept.ReplyBound(ctx) }

// BoundReply is kept.BoundReply.
func BoundReply(verb string, rep *Reply, max int) *Reply { return kept.BoundReply(verb, rep, max) }

// ShortReply is kept.ShortReply.
func ShortReply(verb string, rep *Reply, size, max int, why error) *Reply {
	return kept.ShortReply(verb, rep, size, max, why)
}

// HumanBytes is kept.HumanBytes.
func HumanBytes(n int64) string { return kept.HumanBytes(n) }

// ParseSchedule is kept.ParseSchedule.
func ParseSchedule(every, zone string) (Schedule, error) { return kept.ParseSchedule(every, zone) }

// ScheduledFingerprint is kept.ScheduledFingerprint.
func ScheduledFingerprint(due time.Time) string { return kept.ScheduledFingerprint(due) }

// OverridesOf is kept.OverridesOf.
func OverridesOf(r Request) *Overrides { return kept.OverridesOf(r) }

// The engine's short names for contract helpers it shares with kept.
var (
	asideKey         = kept.AsideKey
	pointKey         = kept.PointKey
	boundConsumers   = kept.BoundConsumers
	boundStreams     = kept.BoundStreams
	verdictOf        = kept.VerdictOf
	checkKept        = kept.CheckKept
	plainRune        = kept.PlainRune
	keptTotals       = kept.KeptTotals
	listSaid         = kept.ListSaid
	positionSize     = kept.PositionSize
	replySize        = kept.ReplySize
	progressFrom     = kept.ProgressFrom
	withKind         = kept.WithKind
	asKind           = kept.AsKind
	newEvidenceError = kept.NewEvidenceError
)

const (
	evidenceFile    = kept.EvidenceFile
	summaryFile     = kept.SummaryFile
	maxEvidenceSize = kept.MaxEvidenceSize
)
