package testenv

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for a logger's concurrent writes and a test's reads: where a
// test reads the log of a server it runs.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
