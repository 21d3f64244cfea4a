//go:build !linux

package wrap

import (
	"errors"
	"os"
	"sync/atomic"
	"time"
)

func pipe() (r, w *os.File, err error) { return os.Pipe() }

// outPipe is the read end of the child's stdout as the relay reads it. It
// reads like the pipe until childExited is called; from then on, a Read
// that finds nothing to read for quietAfterExit returns errQuiet, because
// a process the child started may hold the pipe open for as long as it
// runs. Here the pipe is in the runtime's poller and a read deadline does
// it; where deadlines are not supported, the stream ends at end of file
// only, as before.
type outPipe struct {
	f      *os.File
	exited atomic.Bool
}

func newOutPipe(f *os.File) (*outPipe, error) { return &outPipe{f: f}, nil }

func (p *outPipe) Read(b []byte) (int, error) {
	n, err := p.f.Read(b)
	if n > 0 && p.exited.Load() {
		_ = p.f.SetReadDeadline(time.Now().Add(quietAfterExit))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, errQuiet
	}
	return n, err
}

func (p *outPipe) childExited() {
	p.exited.Store(true)
	_ = p.f.SetReadDeadline(time.Now().Add(quietAfterExit))
}

func (p *outPipe) Close() error { return p.f.Close() }
