package wrap

import (
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// pipe returns a pipe whose ends are in blocking mode, so a read waits in
// the kernel on its own thread and wakes the moment bytes arrive, instead
// of going through the runtime's poller (which costs tens of microseconds
// per wake-up on a small machine; docs/perf/wrap.md).
func pipe() (r, w *os.File, err error) {
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// outPipe is the read end of the child's stdout as the relay reads it. It
// reads like the pipe until childExited is called; from then on, a Read
// that finds nothing to read for quietAfterExit returns errQuiet, because
// a process the child started may hold the pipe open for as long as it
// runs. Read waits in ppoll(2) on the pipe and on a second pipe that
// childExited closes, so a Read already waiting wakes up then: a blocking
// read(2) could not be interrupted. Read is called by one goroutine;
// childExited and Close by another.
type outPipe struct {
	f            *os.File
	fd           int32
	wakeR, wakeW *os.File // closing wakeW wakes Read: the child has exited
	wakeFd       int32
	exited       bool // Read has seen wakeR ready
	once         sync.Once
}

func newOutPipe(f *os.File) (*outPipe, error) {
	wr, ww, err := pipe()
	if err != nil {
		return nil, err
	}
	return &outPipe{f: f, fd: int32(f.Fd()), wakeR: wr, wakeW: ww, wakeFd: int32(wr.Fd())}, nil
}

// pollFd is struct pollfd.
type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

const pollIn = 0x1

func (p *outPipe) Read(b []byte) (int, error) {
	for {
		fds := [2]pollFd{{fd: p.fd, events: pollIn}, {fd: p.wakeFd, events: pollIn}}
		n, timeout := 2, time.Duration(-1)
		if p.exited {
			n, timeout = 1, quietAfterExit
		}
		ready, err := ppoll(fds[:n], timeout)
		if err != nil {
			return 0, err
		}
		switch {
		case ready == 0:
			return 0, errQuiet
		case fds[0].revents != 0: // data, end of file or an error: read tells
			return p.f.Read(b)
		default:
			p.exited = true
		}
	}
}

// ppoll waits for fds; a negative timeout waits for ever.
func ppoll(fds []pollFd, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		var ts *syscall.Timespec
		if timeout >= 0 {
			t := syscall.NsecToTimespec(max(int64(time.Until(deadline)), 0))
			ts = &t
		}
		n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		switch e {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		default:
			return 0, os.NewSyscallError("ppoll", e)
		}
	}
}

// childExited starts the end of the stream (see outPipe).
func (p *outPipe) childExited() {
	p.once.Do(func() { p.wakeW.Close() })
}

func (p *outPipe) Close() error {
	p.childExited()
	p.wakeR.Close()
	return p.f.Close()
}
