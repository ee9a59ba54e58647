package kept

// Verb names, as on the wire.
const (
	VerbSnapshot = "snapshot-kept"
	VerbRestore  = "restore-kept"
	VerbDiscard  = "discard-aside"
	VerbList     = "list-kept"
	VerbVerify   = "verify-kept"
	VerbPrune    = "prune-kept"
	// The plan verbs: record, show and remove the plan of one kept data.
	VerbSetPlan    = "set-plan"
	VerbShowPlan   = "show-plan"
	VerbRemovePlan = "remove-plan"
	// VerbShowEvidence reads back the evidence report of a restore.
	VerbShowEvidence = "show-evidence"
	// VerbDiscardPoint removes one restore point on a person's call.
	VerbDiscardPoint = "discard-point"
)

// VerbImport is what ImportKept records its acts as. It is no verb on the
// wire: `nats-keeper import` runs it in its own process, beside the store,
// since the bytes of a backup are big (see ImportKept). Its request is
// checked as snapshot-kept's.
const VerbImport = "import-kept"

// Weight says how a verb is admitted by the service: a heavy one reads or
// writes a whole archive, runs in one of the few heavy slots (or is refused
// at once, to be tried later) and reports its progress.
type Weight int

// The weights of verbs.
const (
	Light             Weight = iota // any other: waits for a slot
	Heavy                           // always heavy
	HeavyUnlessDryRun               // heavy, but a dry run only plans
)

// Takes names the optional request fields a verb takes; a request that sets
// one its verb does not take is refused (CheckRequest).
type Takes uint

// The optional request fields.
const (
	TakesAsideOnly Takes = 1 << iota // aside-only
	TakesDryRun                      // dry-run
	TakesKeepFor                     // keep-for
	TakesOverrides                   // replicas, placement-cluster, placement-tags
	TakesPage                        // limit, after
	TakesPolicy                      // policy
	TakesPlan                        // streams, consumers
	TakesMethod                      // method, downstream
	TakesCapture                     // capture, settings
	TakesAt                          // at, at-seq
)

// Verb is one verb of the service, declared once in the table (Verbs): the
// service's endpoints and admission, its discovery, the typed client, the
// guards around the engine and the request checks are built from it.
type Verb struct {
	Name   string // as on the wire: the last token of <prefix>.<verb>
	Doc    string // what it does, in one line
	Weight Weight // how the service admits it
	// Writes says the verb writes the keeper's store or spool (unless the
	// request is a dry run): the keeper's directory is checked before it.
	Writes bool
	Takes  Takes // the optional fields its request may set
	// check is the verb's own rules, after those every request meets
	// (CheckFields): the fields it needs, and what they may hold.
	check func(r Request) error
}

// Heavy reports whether the request r (dryRun: its dry-run) to v is heavy.
func (v Verb) Heavy(dryRun bool) bool {
	return v.Weight == Heavy || (v.Weight == HeavyUnlessDryRun && !dryRun)
}

// verbs is the table of verbs, in the order the contract gives them, then
// prune-kept, the plan verbs, show-evidence, discard-point and diff-kept. Each entry's
// request check is beside it.
var verbs = [...]Verb{
	{Name: VerbSnapshot, Doc: "take a restore point", Weight: Heavy, Writes: true, Takes: TakesKeepFor,
		check: func(r Request) error { return checkNoFrom(VerbSnapshot, r) }},
	{Name: VerbRestore, Doc: "restore a point, setting the live data aside", Weight: HeavyUnlessDryRun, Writes: true,
		Takes: TakesAsideOnly | TakesDryRun | TakesOverrides | TakesMethod | TakesAt, check: checkRestore},
	{Name: VerbDiscard, Doc: "remove one aside, on a person's call", Writes: true,
		check: func(r Request) error {
			if r.Why == "" {
				return Errorf(ErrBadRequest, "why is required for discard-aside")
			}
			_, _, err := ParseAsideID(r.From)
			return err
		}},
	{Name: VerbList, Doc: "list the points and asides", Takes: TakesPage, check: checkScope},
	{Name: VerbVerify, Doc: "re-check a point's archive", Weight: Heavy,
		check: func(r Request) error { return checkFromOr(r, needPoint) }},
	{Name: VerbPrune, Doc: "apply a retention policy", Writes: true, Takes: TakesDryRun | TakesPolicy,
		check: func(r Request) error {
			if err := checkPolicy(r.Policy); err != nil {
				return err
			}
			return checkScope(r)
		}},
	{Name: VerbSetPlan, Doc: "record a kept data's streams", Takes: TakesPlan,
		check: func(r Request) error {
			if err := checkPlanVerb(VerbSetPlan, r); err != nil {
				return err
			}
			return checkPlanShape(r.Streams, r.Consumers)
		}},
	{Name: VerbShowPlan, Doc: "the recorded plan", check: func(r Request) error { return checkPlanVerb(VerbShowPlan, r) }},
	{Name: VerbRemovePlan, Doc: "back to the naming rule", check: func(r Request) error { return checkPlanVerb(VerbRemovePlan, r) }},
	{Name: VerbShowEvidence, Doc: "a restore's evidence report",
		check: func(r Request) error {
			if r.From != "" && (r.Module != "" || r.Local != "" || r.Form != 0 || r.Fingerprint != "") {
				return Errorf(ErrBadRequest, "show-evidence takes a from, or module, local, form and fingerprint, not both")
			}
			return checkFromOr(r, needPoint)
		}},
	{Name: VerbDiscardPoint, Doc: "remove one point, on a person's call", Writes: true,
		check: func(r Request) error {
			if r.Why == "" {
				return Errorf(ErrBadRequest, "why is required for discard-point")
			}
			if r.From != "" || r.CatchUp != "" {
				return Errorf(ErrBadRequest, "discard-point takes module, local, form, fingerprint, caller and why, not from or catch-up")
			}
			return needPoint(r)
		}},
	{Name: VerbDiff, Doc: "what the live data changed since a point", Takes: TakesPage, check: checkDiff},
	{Name: VerbCapture, Doc: "capture a kept data continuously, or stop", Writes: true, Takes: TakesCapture, check: checkCapture},
}

// importVerb is import-kept: no verb on the wire, checked as snapshot-kept.
var importVerb = Verb{Name: VerbImport,
	check: func(r Request) error { return checkNoFrom(VerbImport, r) }}

// Verbs is the table of the verbs a service answers, one endpoint each, in
// the order the contract gives them, then prune-kept, the plan verbs,
// show-evidence, discard-point and diff-kept. Each call returns a new slice.
func Verbs() []Verb { return append([]Verb(nil), verbs[:]...) }

// VerbNames is the names of Verbs, in their order. Each call returns a new
// slice.
func VerbNames() []string {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.Name
	}
	return names
}

// LookupVerb is the verb of that name in the table (import-kept too),
// and whether there is one.
func LookupVerb(name string) (Verb, bool) {
	for _, v := range verbs {
		if v.Name == name {
			return v, true
		}
	}
	if name == VerbImport {
		return importVerb, true
	}
	return Verb{Name: name}, false
}
