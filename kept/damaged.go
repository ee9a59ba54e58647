package kept

import (
	"errors"
	"fmt"
)

// ErrDamaged is wrapped by errors about archives that fail verification.
var ErrDamaged = errors.New("archive is damaged")

// DamagedError lists every problem found in one archive.
type DamagedError struct {
	Path     string   // the point or aside whose archive failed
	Problems []string // every problem found, one sentence each
}

// Error names the archive and its first five problems.
func (e *DamagedError) Error() string {
	s := fmt.Sprintf("%s failed verification with %d problem(s)", e.Path, len(e.Problems))
	for i, p := range e.Problems {
		if i == 5 {
			s += fmt.Sprintf("; and %d more", len(e.Problems)-5)
			break
		}
		s += "; " + p
	}
	return s
}

// Unwrap makes a DamagedError both ErrDamaged and ErrFailed for errors.Is.
func (e *DamagedError) Unwrap() []error { return []error{ErrDamaged, ErrFailed} }
