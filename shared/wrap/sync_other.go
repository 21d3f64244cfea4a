//go:build !linux

package wrap

import "os"

// datasync forces f to stable storage (fsync; F_FULLFSYNC on macOS).
func datasync(f *os.File) error { return f.Sync() }
