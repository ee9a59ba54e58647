package kept

import (
	"fmt"
	"slices"
	"strings"
)

// Bounds on what a request may carry.
const (
	MaxNameLen = 128  // module, local, fingerprint, catch-up
	MaxTextLen = 1024 // caller, why
	MaxPathLen = 4096 // from
	MaxForm    = 1_000_000_000
	// MaxKeptLen bounds len(module)+len(local), so that every name made of
	// them fits: the aside id's directory with its -N and .partial suffixes
	// the file system's 255 bytes, the stream OBJ_<module>_<local> the
	// server's 255.
	MaxKeptLen = 224
)

// CheckKept checks that the names made of module and local fit (MaxKeptLen).
func CheckKept(module, local string) error {
	if n := len(module) + len(local); n > MaxKeptLen {
		return Errorf(ErrBadRequest, "module and local are %d bytes together, over the limit of %d, so that every name made of them "+
			"(the aside id, its directory, the stream OBJ_<module>_<local>) fits the file system's and the server's 255 bytes", n, MaxKeptLen)
	}
	return nil
}

// ValidName reports why s is not a plain name, or nil: non-empty, at most
// MaxNameLen bytes, not "." or "..", and free of / \ NUL space * > and ".";
// further, only a-z A-Z 0-9 - _ = (what a KV key token may hold).
// A plain name is safe as one path component, one KV key token and one
// subject token.
func ValidName(what, s string) error {
	switch {
	case s == "":
		return Errorf(ErrBadRequest, "%s is empty", what)
	case len(s) > MaxNameLen:
		return Errorf(ErrBadRequest, "%s is %d bytes long, over the limit of %d", what, len(s), MaxNameLen)
	case s == "." || s == "..":
		return Errorf(ErrBadRequest, "%s may not be %q", what, s)
	}
	for _, r := range s {
		if strings.ContainsRune("/\\ *>.", r) || r < 0x20 || r == 0x7f {
			return Errorf(ErrBadRequest, "%s %q holds %q, which a plain name may not", what, s, r)
		}
		if !PlainRune(r) {
			return Errorf(ErrBadRequest, "%s %q holds %q; a plain name is made of the letters a-z and A-Z, digits, and - _ =, "+
				"which every path, KV key and subject can hold", what, s, r)
		}
	}
	return nil
}

// CheckStreamName says why name is not a stream or consumer name, or nil.
// It is the one rule for such names everywhere in nats-keeper (plans,
// positions, the JetStream adapter, the archive): ValidStreamName,
// non-empty, at most 255 bytes of UTF-8, free of ". * > / \ space" and
// control characters. what names the value in the sentence ("stream",
// "consumer"). The error wraps ErrBadRequest.
func CheckStreamName(what, name string) error {
	if ValidStreamName(name) {
		return nil
	}
	shown := name
	if len(shown) > 64 {
		shown = shown[:64] + "…"
	}
	return Errorf(ErrBadRequest, "%s %q is not a stream or consumer name: one is 1 to %d bytes of UTF-8 without . * > / \\, spaces or control characters",
		what, shown, MaxStreamNameLen)
}

// PlainRune reports the characters a name may have so that it is safe as a path
// component, a KV key token and a subject token everywhere.
func PlainRune(r rune) bool {
	return (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' || r == '_' || r == '='
}

func checkText(what, s string) error {
	if len(s) > MaxTextLen {
		return Errorf(ErrBadRequest, "%s is %d bytes long, over the limit of %d", what, len(s), MaxTextLen)
	}
	for _, r := range s {
		if r == 0 {
			return Errorf(ErrBadRequest, "%s holds a NUL byte", what)
		}
	}
	return nil
}

// Bounds on a plan.
const (
	MaxPlanStreams   = 64
	MaxPlanConsumers = 256
)

// CheckRequest checks a request for one verb before anything is done: every
// name plain, every text bounded, every field the verb needs present. Its
// error wraps ErrBadRequest.
func CheckRequest(verb string, r Request) error {
	if err := CheckFields(verb, r); err != nil {
		return fmt.Errorf("%s refused: %w, so nothing was done", verb, err)
	}
	return nil
}

// CheckFields is CheckRequest without its "refused, so nothing was done"
// frame: the bare sentence of what is wrong, wrapping ErrBadRequest. The
// rules every request meets are here; a verb's own are beside its entry in
// the table (verbs.go).
func CheckFields(verb string, r Request) error {
	for what, s := range map[string]string{"caller": r.Caller, "why": r.Why} {
		if err := checkText(what, s); err != nil {
			return err
		}
	}
	// A name given is checked whatever the verb, also where the verb does
	// not use it: a request is refused whole rather than half read.
	for _, n := range [...]struct{ what, s string }{{"module", r.Module}, {"local", r.Local}, {"fingerprint", r.Fingerprint}} {
		if n.what == "local" && n.s == AllLocals && (verb == VerbSnapshot || verb == VerbRestore) {
			continue // every kept data of the module at one cut (AllLocals)
		}
		if n.s != "" {
			if err := ValidName(n.what, n.s); err != nil {
				return err
			}
		}
	}
	if err := CheckKept(r.Module, r.Local); err != nil {
		return err
	}
	if len(r.From) > MaxPathLen {
		return Errorf(ErrBadRequest, "from is %d bytes long, over the limit of %d", len(r.From), MaxPathLen)
	}
	if r.Form < 0 || r.Form > MaxForm {
		return Errorf(ErrBadRequest, "form %d is outside 0..%d", r.Form, MaxForm)
	}
	if r.CatchUp != "" {
		if err := ValidName("catch-up", r.CatchUp); err != nil {
			return err
		}
	}
	v, known := LookupVerb(verb)
	for _, o := range optional {
		if !o.set(r) {
			continue
		}
		if v.Takes&o.field == 0 {
			return Errorf(ErrBadRequest, "%s takes no %s; only %s", verb, o.what, takers(o.field))
		}
		if o.check != nil {
			if err := o.check(verb, r); err != nil {
				return err
			}
		}
	}
	if !known {
		return Errorf(ErrBadRequest, "unknown verb %q", verb)
	}
	return v.check(r)
}

// optional is the rule of each optional field, in the order they are
// checked: a request that sets one must be of a verb that takes it, and
// then meet its check.
var optional = [...]struct {
	field Takes
	what  string
	set   func(Request) bool
	check func(verb string, r Request) error // verb: the verb the request is of
}{
	{TakesAsideOnly, "aside-only", func(r Request) bool { return r.AsideOnly }, nil},
	{TakesDryRun, "dry-run", func(r Request) bool { return r.DryRun }, nil},
	{TakesKeepFor, "keep-for", func(r Request) bool { return r.KeepFor != 0 }, func(_ string, r Request) error {
		if r.KeepFor < 0 {
			return Errorf(ErrBadRequest, "keep-for %s is negative", r.KeepFor)
		}
		return nil
	}},
	{TakesOverrides, "replicas, placement-cluster or placement-tags", func(r Request) bool { return OverridesOf(r) != nil }, anyVerb(checkOverrides)},
	{TakesPage, "limit or after", func(r Request) bool { return r.Limit != 0 || r.After != "" }, checkPage},
	{TakesPolicy, "policy", func(r Request) bool { return r.Policy != nil }, nil},
	{TakesPlan, "streams or consumers", func(r Request) bool { return r.Streams != nil || r.Consumers != nil }, nil},
	{TakesCapture, "capture or settings", func(r Request) bool { return r.Capture != "" || r.Settings != nil }, nil},
	{TakesAt, "at or at-seq", func(r Request) bool { return r.At != "" || r.AtSeq != nil }, anyVerb(checkAt)},
	{TakesMethod, "method or downstream", func(r Request) bool { return r.Method != "" || r.Downstream != "" }, anyVerb(checkMethod)},
}

// anyVerb is check as the rule of an optional field, the same for every
// verb that takes it.
func anyVerb(check func(Request) error) func(string, Request) error {
	return func(_ string, r Request) error { return check(r) }
}

// checkPage checks limit and after, each verb that pages by its own rule:
// diff-kept's (checkDiffPage), else list-kept's (checkListPage).
func checkPage(verb string, r Request) error {
	if verb == VerbDiff {
		return checkDiffPage(r)
	}
	return checkListPage(r)
}

// takers says which verbs take field: "restore-kept does", "restore-kept
// and prune-kept do".
func takers(field Takes) string {
	var names []string
	for _, v := range verbs {
		if v.Takes&field != 0 {
			names = append(names, v.Name)
		}
	}
	if len(names) == 1 {
		return names[0] + " does"
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1] + " do"
}

// needPoint requires the names of one point: module, local and fingerprint.
func needPoint(r Request) error {
	if err := ValidName("module", r.Module); err != nil {
		return err
	}
	if r.Local == AllLocals {
		if r.CatchUp != "" || r.KeepFor != 0 {
			return Errorf(ErrBadRequest, `snapshot-kept with local "*" takes no catch-up or keep-for`)
		}
		return ValidName("fingerprint", r.Fingerprint)
	}
	if err := ValidName("local", r.Local); err != nil {
		return err
	}
	return ValidName("fingerprint", r.Fingerprint)
}

// checkNoFrom is snapshot-kept's (and import-kept's) check: no from, and
// the names of the point to take.
func checkNoFrom(verb string, r Request) error {
	if r.From != "" {
		return Errorf(ErrBadRequest, "%s takes no from", verb)
	}
	return needPoint(r)
}

// checkFromOr checks r's from when it has one, else applies orElse.
func checkFromOr(r Request, orElse func(Request) error) error {
	if r.From != "" {
		return checkFromShape(r.From)
	}
	return orElse(r)
}

// checkRestore is restore-kept's check.
func checkRestore(r Request) error {
	if err := ValidName("module", r.Module); err != nil {
		return err
	}
	if r.Local != AllLocals {
		if err := ValidName("local", r.Local); err != nil {
			return err
		}
	}
	if r.Why == "" {
		return Errorf(ErrBadRequest, "why is required for restore-kept")
	}
	if r.Local == AllLocals && r.At == "" {
		return Errorf(ErrBadRequest, `restore-kept with local "*" restores every captured kept data of the module to one moment: it needs at`)
	}
	if r.AsideOnly {
		// A migration hook flips AsideOnly on the request it took its
		// point with: form, fingerprint and catch-up are then simply
		// not used. A from names what to restore, which contradicts it.
		if r.From != "" {
			return Errorf(ErrBadRequest, "aside-only restores nothing, so it takes no from")
		}
		return nil
	}
	if r.At != "" || r.AtSeq != nil {
		return nil // checkAt
	}
	return checkFromOr(r, func(r Request) error { return ValidName("fingerprint", r.Fingerprint) })
}

// checkPlanVerb is the check of the plan verbs: module and local only.
func checkPlanVerb(verb string, r Request) error {
	if r.From != "" || r.Form != 0 || r.Fingerprint != "" || r.CatchUp != "" {
		return Errorf(ErrBadRequest, "%s takes module, local, caller and why (and set-plan streams and consumers), not from, form, fingerprint or catch-up", verb)
	}
	if err := ValidName("module", r.Module); err != nil {
		return err
	}
	return ValidName("local", r.Local)
}

// checkPolicy checks prune-kept's policy, when it has one.
func checkPolicy(p *Policy) error {
	if p == nil {
		return nil
	}
	if err := p.Check(); err != nil {
		return err
	}
	if p.Empty() {
		return Errorf(ErrBadRequest, "the policy keeps nothing by any rule; give keep-last, keep-within, keep-daily, keep-weekly or keep-monthly")
	}
	return nil
}

// checkScope is list-kept's and prune-kept's: an optional module, and a
// local only with a module.
func checkScope(r Request) error {
	if r.Module != "" {
		if err := ValidName("module", r.Module); err != nil {
			return err
		}
	}
	if r.Local != "" {
		if r.Module == "" {
			return Errorf(ErrBadRequest, "local needs a module")
		}
		return ValidName("local", r.Local)
	}
	return nil
}

func checkFromShape(from string) error {
	if strings.ContainsRune(from, 0) {
		return Errorf(ErrBadRequest, "from holds a NUL byte")
	}
	return nil
}

// ParseAsideID checks an aside id, <module>.<local>.<yyyymmddThhmmss>[-N],
// and returns its module and local.
func ParseAsideID(id string) (module, local string, err error) {
	if id == "" {
		return "", "", Errorf(ErrBadRequest, "the aside id is empty")
	}
	parts := strings.Split(id, ".")
	if len(parts) != 3 {
		return "", "", Errorf(ErrBadRequest, "aside id %.200q is not <module>.<local>.<time>", id)
	}
	for i, what := range []string{"module of the aside id", "local of the aside id", "time of the aside id"} {
		if err := ValidName(what, parts[i]); err != nil {
			return "", "", err
		}
	}
	if err := CheckKept(parts[0], parts[1]); err != nil {
		return "", "", err
	}
	return parts[0], parts[1], nil
}

// Bounds of a restore's overrides.
const (
	MaxReplicas = 5 // the most replicas JetStream gives a stream
	MaxTags     = 16
	MaxTagLen   = 64
)

// checkOverrides checks a restore's replicas, placement cluster and tags
// (only restore-kept takes them: CheckFields): not with aside-only (which
// restores nothing); replicas 1 to 5; the cluster and each tag a plain name.
func checkOverrides(r Request) error {
	if r.AsideOnly {
		return Errorf(ErrBadRequest, "aside-only restores no stream, so it takes no replicas, placement-cluster or placement-tags")
	}
	if r.Replicas < 0 || r.Replicas > MaxReplicas {
		return Errorf(ErrBadRequest, "replicas %d is outside 1..%d", r.Replicas, MaxReplicas)
	}
	if r.PlacementCluster != "" {
		if err := checkTag("placement-cluster", r.PlacementCluster); err != nil {
			return err
		}
	}
	if len(r.PlacementTags) > MaxTags {
		return Errorf(ErrBadRequest, "placement-tags holds %d tags, over the limit of %d", len(r.PlacementTags), MaxTags)
	}
	for _, tag := range r.PlacementTags {
		if err := checkTag("placement tag", tag); err != nil {
			return err
		}
	}
	return nil
}

// checkTag checks a server tag or cluster name: 1 to MaxTagLen bytes of
// printable ASCII with no space (tags are often key:value, as az:us-east-1).
func checkTag(what, s string) error {
	if s == "" || len(s) > MaxTagLen {
		return Errorf(ErrBadRequest, "%s %.20q is %d bytes long; it must be 1 to %d", what, s, len(s), MaxTagLen)
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return Errorf(ErrBadRequest, "%s %q holds %q; it may hold printable ASCII other than a space", what, s, r)
		}
	}
	return nil
}

// checkPlanShape checks a plan's lists before anything is read: their
// lengths, every name by the one stream-name rule, no stream twice.
func checkPlanShape(streams []string, consumers []PlanConsumer) error {
	if len(streams) == 0 || len(streams) > MaxPlanStreams {
		return Errorf(ErrBadRequest, "a plan names 1 to %d streams, not %d", MaxPlanStreams, len(streams))
	}
	for i, s := range streams {
		if err := CheckStreamName("stream", s); err != nil {
			return err
		}
		if slices.Contains(streams[:i], s) {
			return Errorf(ErrBadRequest, "the plan names stream %s twice", s)
		}
	}
	if len(consumers) > MaxPlanConsumers {
		return Errorf(ErrBadRequest, "a plan names at most %d consumers, not %d", MaxPlanConsumers, len(consumers))
	}
	for _, c := range consumers {
		if err := CheckStreamName("the stream of a plan's consumer", c.Stream); err != nil {
			return err
		}
		if err := CheckStreamName("consumer", c.Consumer); err != nil {
			return err
		}
	}
	return nil
}
