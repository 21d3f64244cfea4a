package wrap

import (
	"os"
	"syscall"
)

// datasync forces f's data (and the metadata needed to read it back, such
// as its size) to stable storage.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
