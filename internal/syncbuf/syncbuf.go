// Package syncbuf is a bytes.Buffer that several goroutines may share, for
// tests that read a log or a child process's output while it is written.
//
// It imports only the standard library.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write and String. Its zero value is empty
// and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
