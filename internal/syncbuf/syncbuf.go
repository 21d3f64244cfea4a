// Package syncbuf is a bytes.Buffer safe for one writer and concurrent
// readers: the output of a subprocess or goroutine a test reads while it runs.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a locked bytes.Buffer. The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
