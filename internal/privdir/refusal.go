package privdir

import "errors"

// ErrNotPrivate is wrapped by every refusal: the directory is a symlink, not
// a directory, not the keeper user's, or open to group or other.
var ErrNotPrivate = errors.New("the keeper's directory is not private")

// Refusal is why a directory is not private (What) and how to make it so
// (Fix). It wraps ErrNotPrivate.
type Refusal struct{ What, Fix string }

func (e *Refusal) Error() string { return e.What + "; " + e.Fix }
func (e *Refusal) Unwrap() error { return ErrNotPrivate }

// Path is the directory, absolute, its parents' symlinks resolved.
func (d *Dir) Path() string { return d.path }
