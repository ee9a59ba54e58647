package kept

import (
	"fmt"
	"time"
)

// VerbCapture turns the capture of one kept data on or off.
const VerbCapture = "capture-kept"

// AllLocals, as snapshot-kept's local, takes every captured kept data of
// the module at one cut, one point each; as restore-kept's (with at), it
// restores them all to that moment.
const AllLocals = "*"

// Capture's defaults (changes.md, capture). A segment is closed after one
// second of data or 8 MiB, whichever comes first: a second bounds what a
// restore to a moment can miss of the newest data (the capture's lag), and
// 8 MiB is one store part, so a segment is at most one part upload and one
// object per second per kept data stays cheap on every store. A new base
// is taken daily, so a restore to a moment reads at most a day of segments
// after its base. The window is kept 7 days, as long as a week's release
// train needs to find a bad migration.
const (
	DefaultSegmentEvery = Duration(time.Second)
	DefaultSegmentBytes = int64(8 << 20)
	DefaultBaseEvery    = Duration(24 * time.Hour)
	DefaultWindow       = Duration(7 * 24 * time.Hour)
	// Bounds of the settings.
	MinSegmentEvery = Duration(time.Second)
	MaxSegmentEvery = Duration(time.Hour)
	MinSegmentBytes = int64(64 << 10)
	MaxSegmentBytes = int64(256 << 20)
	MinBaseEvery    = Duration(time.Minute)
	MinWindow       = Duration(time.Minute)
)

// CaptureSettings are how a kept data is captured; zero fields take the
// defaults.
type CaptureSettings struct {
	SegmentEvery Duration `json:"segment-every,omitempty"` // a segment is closed after this much time of data
	SegmentBytes int64    `json:"segment-bytes,omitempty"` // or this many bytes, whichever comes first
	BaseEvery    Duration `json:"base-every,omitempty"`    // a new base is taken this often
	Window       Duration `json:"window,omitempty"`        // how far back a restore to a moment can go
}

// WithDefaults is s with each zero field set to its default.
func (s CaptureSettings) WithDefaults() CaptureSettings {
	if s.SegmentEvery == 0 {
		s.SegmentEvery = DefaultSegmentEvery
	}
	if s.SegmentBytes == 0 {
		s.SegmentBytes = DefaultSegmentBytes
	}
	if s.BaseEvery == 0 {
		s.BaseEvery = DefaultBaseEvery
	}
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	return s
}

// Check refuses settings outside their bounds.
func (s CaptureSettings) Check() error {
	d := s.WithDefaults()
	switch {
	case d.SegmentEvery < MinSegmentEvery || d.SegmentEvery > MaxSegmentEvery:
		return Errorf(ErrBadRequest, "segment-every %s is not between %s and %s", d.SegmentEvery, MinSegmentEvery, MaxSegmentEvery)
	case d.SegmentBytes < MinSegmentBytes || d.SegmentBytes > MaxSegmentBytes:
		return Errorf(ErrBadRequest, "segment-bytes %d is not between %d and %d", d.SegmentBytes, MinSegmentBytes, MaxSegmentBytes)
	case d.BaseEvery < MinBaseEvery || d.BaseEvery > MaxDuration:
		return Errorf(ErrBadRequest, "base-every %s is not between %s and %s", d.BaseEvery, MinBaseEvery, MaxDuration)
	case d.Window < MinWindow || d.Window > MaxDuration:
		return Errorf(ErrBadRequest, "window %s is not between %s and %s", d.Window, MinWindow, MaxDuration)
	}
	return nil
}

// CaptureRecord is capture.<module>.<local> in the index: whether the kept
// data is captured and how. Every keeper of the bus reads it; the one that
// holds the kept data's capture lease captures it.
type CaptureRecord struct {
	Module   string          `json:"module"`
	Local    string          `json:"local"`
	On       bool            `json:"on"`
	Form     int             `json:"form,omitempty"` // the form its bases are taken at
	Settings CaptureSettings `json:"settings"`
	Since    time.Time       `json:"since"` // when it was turned on or off
	Caller   string          `json:"caller,omitempty"`
	Why      string          `json:"why,omitempty"`
}

// CaptureInfo is what list-kept and capture-kept say of one kept data's
// capture.
type CaptureInfo struct {
	Module   string          `json:"module"`
	Local    string          `json:"local"`
	On       bool            `json:"on"`
	Settings CaptureSettings `json:"settings"`
	// From and To are the window a restore to a moment can reach: from
	// the oldest base kept to the newest committed segment's close.
	From *time.Time `json:"from,omitempty"`
	To   *time.Time `json:"to,omitempty"`
	// LagMS is how long ago the newest segment was closed, in
	// milliseconds, when it was read.
	LagMS    int64 `json:"lag-ms,omitempty"`
	Bytes    int64 `json:"bytes"`    // what the bases' segments hold in the store
	Segments int   `json:"segments"` // how many segments are kept
	Bases    int   `json:"bases"`    // how many chains (a base and its segments) are kept
}

// checkCapture is capture-kept's rule.
func checkCapture(r Request) error {
	if err := ValidName("module", r.Module); err != nil {
		return err
	}
	if err := ValidName("local", r.Local); err != nil {
		return err
	}
	if r.Capture != "on" && r.Capture != "off" {
		return Errorf(ErrBadRequest, "capture must be \"on\" or \"off\", not %q", r.Capture)
	}
	if r.From != "" || r.Fingerprint != "" || r.CatchUp != "" {
		return Errorf(ErrBadRequest, "capture-kept takes module, local, capture, form, settings, caller and why, not from, fingerprint or catch-up")
	}
	if r.Settings != nil {
		if r.Capture == "off" {
			return Errorf(ErrBadRequest, "capture off takes no settings")
		}
		return r.Settings.Check()
	}
	return nil
}

// checkAt checks restore-kept's at and at-seq.
func checkAt(r Request) error {
	if r.At != "" && r.AtSeq != nil {
		return Errorf(ErrBadRequest, "restore-kept takes at or at-seq, not both")
	}
	if r.From != "" || r.Fingerprint != "" || r.AsideOnly {
		return Errorf(ErrBadRequest, "a restore to a moment takes no from, fingerprint or aside-only: the moment names what is restored")
	}
	if r.At != "" {
		if _, err := ParseAt(r.At); err != nil {
			return err
		}
	}
	if r.AtSeq != nil {
		if len(r.AtSeq) == 0 || len(r.AtSeq) > MaxPlanStreams {
			return Errorf(ErrBadRequest, "at-seq names 1 to %d streams", MaxPlanStreams)
		}
		for s, n := range r.AtSeq {
			if !ValidStreamName(s) {
				return Errorf(ErrBadRequest, "at-seq names %q, which is not a stream name", s)
			}
			if n == 0 {
				return Errorf(ErrBadRequest, "at-seq of stream %s is 0; sequences begin at 1", s)
			}
		}
	}
	return nil
}

// ParseAt reads a restore's at: an RFC 3339 time.
func ParseAt(s string) (time.Time, error) {
	if len(s) > 64 {
		return time.Time{}, Errorf(ErrBadRequest, "at is longer than 64 characters")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, Errorf(ErrBadRequest, "at %q is not an RFC 3339 time (%s)", s, fmt.Sprint(err))
	}
	return t.UTC(), nil
}
