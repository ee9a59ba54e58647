package kept

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Verdicts of an evidence report and of each of its checks.
const (
	Pass = "PASS"
	Fail = "FAIL"
)

// The checks of an evidence report (Check.Name), in the order they are made.
const (
	CheckPointVerified = "point-verified"   // the point verified before anything was touched
	CheckAsideVerified = "aside-verified"   // the aside is complete and verifies
	CheckNoWritesAfter = "no-late-writes"   // no live stream took a message after its aside began
	CheckStreams       = "streams-restored" // each restored stream's messages, bytes, first and last sequence are the manifest's
	CheckConsumers     = "consumers-set"    // each consumer is at its recorded position, its configuration unchanged
	CheckKVKeys        = "kv-keys"          // each KV bucket has as many keys as in the point
	CheckObjects       = "objects"          // each object store has as many objects as in the point
	CheckLogical       = "logical-values"   // each key a logical restore wrote holds the point's value
)

// Files of an evidence report in the store, beside the aside it made, or,
// for a restore into absent kept data, beside the record of what it
// restored from.
const (
	EvidenceFile = "evidence.json"
	SummaryFile  = "summary.md"
)

// maxEvidenceItems bounds the streams or consumers one check lists; the
// failed ones are listed first, and Omitted counts the others left out.
const maxEvidenceItems = 64

// MaxEvidenceSize bounds evidence.json as the keeper reads it back.
const MaxEvidenceSize = 1 << 20

// Evidence is the report of one restore-kept that changed the bus: a PASS
// or FAIL verdict for each check, with the figures behind it, and the time
// of each step. It is written as evidence.json (this JSON) and summary.md,
// and returned in the restore's reply. Its verdict is PASS only when every
// Find passed; a check the keeper could not make is a FAIL that says why.
type Evidence struct {
	Verdict   string     `json:"verdict"`                             // PASS or FAIL
	Failed    []string   `json:"failed,omitempty"`                    // the names of the checks that failed
	Module    string     `json:"module"`                              // the module
	Local     string     `json:"local"`                               // the kept data
	Kind      string     `json:"kind"`                                // KindIntoAbsent, KindReplace or KindAsideOnly
	Point     string     `json:"point,omitempty"`                     // the key prefix of what was restored (a point, or aside/<id>)
	PointSum  string     `json:"point-sum,omitempty" was:"point_sum"` // that archive's checksum, as its record has it
	Aside     string     `json:"aside,omitempty"`                     // the id of the aside this restore made
	Dir       string     `json:"dir"`                                 // where the report lies in the store (key prefix)
	Caller    string     `json:"caller,omitempty"`                    // who asked
	Why       string     `json:"why,omitempty"`                       // why
	Recovered bool       `json:"recovered,omitempty"`                 // a keeper that started again finished the restore
	Started   time.Time  `json:"started"`                             // when the restore began (UTC)
	Ended     time.Time  `json:"ended"`                               // when the report was made (UTC)
	Checks    []Check    `json:"checks"`                              // the checks, in order
	Steps     []StepTime `json:"steps"`                               // the time of each step
	Said      string     `json:"said"`                                // the verdict in one sentence
}

// Check is one verdict of an evidence report, with its figures.
type Check struct {
	Name      string            `json:"name"`                // one of the Check* names
	Verdict   string            `json:"verdict"`             // PASS or FAIL
	Said      string            `json:"said"`                // the verdict and its figures in one sentence
	Archive   *ArchiveFigures   `json:"archive,omitempty"`   // point-verified, aside-verified
	Streams   []StreamFigures   `json:"streams,omitempty"`   // no-late-writes, streams-restored, kv-keys, objects
	Consumers []ConsumerFigures `json:"consumers,omitempty"` // consumers-set
	Omitted   int               `json:"omitted,omitempty"`   // passing items left out (maxEvidenceItems)
}

// ArchiveFigures is what a verification of one archive read.
type ArchiveFigures struct {
	Size         int64  `json:"size"`                              // the archive's bytes, as its record has them and the store holds them
	Sum          string `json:"sum,omitempty"`                     // its checksum, as the store computed it when it was committed
	BytesChecked int64  `json:"bytes-checked" was:"bytes_checked"` // the entry bytes read and checked against the manifest's SHA-256
	Streams      int    `json:"streams"`                           // the streams it holds
	How          string `json:"how"`                               // how and when it was verified
}

// StreamCount is what one stream held, as a manifest or an aside records
// it (want) or as the bus told it (got).
type StreamCount struct {
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first-seq" was:"first_seq"`
	LastSeq  uint64 `json:"last-seq" was:"last_seq"`
}

// SubjectFigures is the count of a KV bucket's keys or an object store's
// objects: subjects holding a message, in the point (as the server wrote
// them in its snapshot's backup.json) and on the bus after the restore.
type SubjectFigures struct {
	Want    uint64  `json:"want-subjects" was:"want_subjects"`
	Got     uint64  `json:"got-subjects" was:"got_subjects"`
	Objects *uint64 `json:"objects,omitempty"`                             // an object store's objects: subjects of its meta messages
	Chunks  *uint64 `json:"chunk-subjects,omitempty" was:"chunk_subjects"` // and of its chunks
}

// StreamFigures is one stream of a check: what was wanted and what was got.
type StreamFigures struct {
	Stream  string          `json:"stream"`
	Method  string          `json:"method,omitempty"` // streams-restored: the restore method it got (full, delta)
	Verdict string          `json:"verdict"`
	Want    *StreamCount    `json:"want,omitempty"`
	Got     *StreamCount    `json:"got,omitempty"`   // nil when it could not be read (Note says why)
	Count   *SubjectFigures `json:"count,omitempty"` // kv-keys and objects
	Note    string          `json:"note,omitempty"`
}

// ConsumerFigures is one consumer of the consumers-set check.
type ConsumerFigures struct {
	Stream     string  `json:"stream"`
	Consumer   string  `json:"consumer"`
	By         string  `json:"by"`      // how it was set back: MoveWithStream, MoveReset, MoveCreate
	Verdict    string  `json:"verdict"` // PASS or FAIL
	WantFloor  uint64  `json:"want-ack-floor" was:"want_ack_floor"`
	GotFloor   *uint64 `json:"got-ack-floor,omitempty" was:"got_ack_floor"` // nil when it could not be read
	WantConfig string  `json:"want-config" was:"want_config"`               // the SHA-256 of the configuration it must have (configSum)
	GotConfig  string  `json:"got-config,omitempty" was:"got_config"`       // and of the one it has
	Note       string  `json:"note,omitempty"`
}

// StepTime is when one step of the restore ran.
type StepTime struct {
	Step    string    `json:"step"` // "verify", "aside", "remove", "restore", "position", "check"
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
	Seconds float64   `json:"seconds"`
}

// Conclude sets the report's verdict, its failed checks and its sentence.
func (ev *Evidence) Conclude(now time.Time) {
	ev.Ended = now.UTC()
	ev.Failed = nil
	for _, c := range ev.Checks {
		if c.Verdict != Pass {
			ev.Failed = append(ev.Failed, c.Name)
		}
	}
	ev.Verdict = Pass
	if len(ev.Failed) > 0 || len(ev.Checks) == 0 {
		ev.Verdict = Fail
	}
	switch {
	case len(ev.Checks) == 0:
		ev.Said = "FAIL: no check was made"
	case ev.Verdict == Pass:
		ev.Said = fmt.Sprintf("PASS: all %d checks passed", len(ev.Checks))
	default:
		ev.Said = fmt.Sprintf("FAIL: %d of %d checks failed (%s)", len(ev.Failed), len(ev.Checks), strings.Join(ev.Failed, ", "))
	}
}

// SetCheck puts c in the report, in place of an earlier one of its name.
func (ev *Evidence) SetCheck(c Check) {
	for i := range ev.Checks {
		if ev.Checks[i].Name == c.Name {
			ev.Checks[i] = c
			return
		}
	}
	ev.Checks = append(ev.Checks, c)
}

// check returns the check of that name, or nil.
func (ev *Evidence) Find(name string) *Check {
	for i := range ev.Checks {
		if ev.Checks[i].Name == name {
			return &ev.Checks[i]
		}
	}
	return nil
}

// Timed records that step ran from began until now.
func (ev *Evidence) Timed(step string, began, now time.Time) {
	ev.Steps = append(ev.Steps, StepTime{Step: step, Started: began.UTC(), Ended: now.UTC(),
		Seconds: now.Sub(began).Round(time.Millisecond).Seconds()})
}

// VerdictOf is PASS when ok.
func VerdictOf(ok bool) string {
	if ok {
		return Pass
	}
	return Fail
}

// BoundStreams keeps at most maxEvidenceItems streams, the failed first, in
// their order otherwise, and returns how many passing ones it left out.
func BoundStreams(fs []StreamFigures) ([]StreamFigures, int) {
	if len(fs) <= maxEvidenceItems {
		return fs, 0
	}
	slices.SortStableFunc(fs, func(a, b StreamFigures) int { return failFirst(a.Verdict, b.Verdict) })
	return fs[:maxEvidenceItems], len(fs) - maxEvidenceItems
}

// BoundConsumers is BoundStreams for consumers.
func BoundConsumers(fs []ConsumerFigures) ([]ConsumerFigures, int) {
	if len(fs) <= maxEvidenceItems {
		return fs, 0
	}
	slices.SortStableFunc(fs, func(a, b ConsumerFigures) int { return failFirst(a.Verdict, b.Verdict) })
	return fs[:maxEvidenceItems], len(fs) - maxEvidenceItems
}

func failFirst(a, b string) int {
	switch {
	case a == b:
		return 0
	case a == Fail:
		return -1
	case b == Fail:
		return 1
	}
	return 0
}

// EvidenceError is the failure of a restore that was done, whose evidence
// fails: the data is left as the restore made it, and the aside stays.
// errors.As finds it; it is a kind of ErrFailed.
type EvidenceError struct {
	Evidence *Evidence
	err      error
}

// NewEvidenceError is the failure err of a restore that was done, whose
// evidence ev fails.
func NewEvidenceError(ev *Evidence, err error) *EvidenceError {
	return &EvidenceError{Evidence: ev, err: err}
}

func (e *EvidenceError) Error() string { return e.err.Error() }

func (e *EvidenceError) Unwrap() []error { return []error{e.err, ErrFailed} }
