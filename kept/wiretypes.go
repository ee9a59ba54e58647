package kept

// The contract's types with keys renamed from snake_case (wirecase.go):
// each encodes and decodes through a twin without methods, so that
// MarshalWire and UnmarshalWire add and read the old keys. A type that gains
// a `was` tag needs its twin and its two methods here
// (TestWireTypesHaveMethods checks it).
type (
	wireReply           Reply
	wireKeptTotal       KeptTotal
	wirePosition        Position
	wireStreamSum       StreamSum
	wirePoint           Point
	wireAside           Aside
	wireEncryption      Encryption
	wireEvidence        Evidence
	wireArchiveFigures  ArchiveFigures
	wireStreamCount     StreamCount
	wireSubjectFigures  SubjectFigures
	wireConsumerFigures ConsumerFigures
	wireProgress        Progress
)

func (v Reply) MarshalJSON() ([]byte, error)          { return MarshalWire((*wireReply)(&v)) }
func (v *Reply) UnmarshalJSON(b []byte) error         { return UnmarshalWire(b, (*wireReply)(v)) }
func (v KeptTotal) MarshalJSON() ([]byte, error)      { return MarshalWire((*wireKeptTotal)(&v)) }
func (v *KeptTotal) UnmarshalJSON(b []byte) error     { return UnmarshalWire(b, (*wireKeptTotal)(v)) }
func (v Position) MarshalJSON() ([]byte, error)       { return MarshalWire((*wirePosition)(&v)) }
func (v *Position) UnmarshalJSON(b []byte) error      { return UnmarshalWire(b, (*wirePosition)(v)) }
func (v StreamSum) MarshalJSON() ([]byte, error)      { return MarshalWire((*wireStreamSum)(&v)) }
func (v *StreamSum) UnmarshalJSON(b []byte) error     { return UnmarshalWire(b, (*wireStreamSum)(v)) }
func (v Point) MarshalJSON() ([]byte, error)          { return MarshalWire((*wirePoint)(&v)) }
func (v *Point) UnmarshalJSON(b []byte) error         { return UnmarshalWire(b, (*wirePoint)(v)) }
func (v Aside) MarshalJSON() ([]byte, error)          { return MarshalWire((*wireAside)(&v)) }
func (v *Aside) UnmarshalJSON(b []byte) error         { return UnmarshalWire(b, (*wireAside)(v)) }
func (v Encryption) MarshalJSON() ([]byte, error)     { return MarshalWire((*wireEncryption)(&v)) }
func (v *Encryption) UnmarshalJSON(b []byte) error    { return UnmarshalWire(b, (*wireEncryption)(v)) }
func (v Evidence) MarshalJSON() ([]byte, error)       { return MarshalWire((*wireEvidence)(&v)) }
func (v *Evidence) UnmarshalJSON(b []byte) error      { return UnmarshalWire(b, (*wireEvidence)(v)) }
func (v ArchiveFigures) MarshalJSON() ([]byte, error) { return MarshalWire((*wireArchiveFigures)(&v)) }
func (v *ArchiveFigures) UnmarshalJSON(b []byte) error {
	return UnmarshalWire(b, (*wireArchiveFigures)(v))
}
func (v StreamCount) MarshalJSON() ([]byte, error)    { return MarshalWire((*wireStreamCount)(&v)) }
func (v *StreamCount) UnmarshalJSON(b []byte) error   { return UnmarshalWire(b, (*wireStreamCount)(v)) }
func (v SubjectFigures) MarshalJSON() ([]byte, error) { return MarshalWire((*wireSubjectFigures)(&v)) }
func (v *SubjectFigures) UnmarshalJSON(b []byte) error {
	return UnmarshalWire(b, (*wireSubjectFigures)(v))
}
func (v ConsumerFigures) MarshalJSON() ([]byte, error) {
	return MarshalWire((*wireConsumerFigures)(&v))
}
func (v *ConsumerFigures) UnmarshalJSON(b []byte) error {
	return UnmarshalWire(b, (*wireConsumerFigures)(v))
}
func (v Progress) MarshalJSON() ([]byte, error)  { return MarshalWire((*wireProgress)(&v)) }
func (v *Progress) UnmarshalJSON(b []byte) error { return UnmarshalWire(b, (*wireProgress)(v)) }

// RecordHead is what a record (*Point or *Aside; anything else is returned
// as it is) is decoded through to leave its positions unread, building
// nothing for them: a field of the outer struct hides the embedded one of
// the same name. The embedded one is the record's twin, without the
// UnmarshalJSON that would decode the whole record; the old keys are read
// as the record's own UnmarshalJSON reads them.
func RecordHead(v any) any {
	switch r := v.(type) {
	case *Aside:
		return &wireHead{&struct {
			*wireAside
			Positions skipped `json:"positions"`
		}{wireAside: (*wireAside)(r)}}
	case *Point:
		return &wireHead{&struct {
			*wirePoint
			Positions skipped `json:"positions"`
		}{wirePoint: (*wirePoint)(r)}}
	}
	return v
}

// wireHead decodes into head, a record's twin beside its positions left
// unread, with UnmarshalWire.
type wireHead struct{ head any }

func (h *wireHead) UnmarshalJSON(data []byte) error { return UnmarshalWire(data, h.head) }

// skipped is a field the decoder passes over, building nothing.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }
