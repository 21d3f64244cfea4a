package wrap

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/aegis-gw/aegis/shared/audit"
)

// EnvParamsKeyFile names the file holding the params key wrap keys its
// records' params_hash with (docs/wrap.md, "The params key"). Unset: the
// file params.key in the aegis directory of the user's configuration
// directory (os.UserConfigDir: $XDG_CONFIG_HOME or ~/.config on Linux,
// ~/Library/Application Support on macOS).
const EnvParamsKeyFile = "AEGIS_PARAMS_KEY_FILE"

// paramsKeyPath is where wrap's params key lives.
func paramsKeyPath(getenv func(string) string) (string, error) {
	if p := getenv(EnvParamsKeyFile); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no configuration directory for the params key (set %s): %w", EnvParamsKeyFile, err)
	}
	return filepath.Join(dir, "aegis", "params.key"), nil
}

// loadParamsKey reads the params key from its file (paramsKeyPath), or,
// when there is none, generates one (crypto/rand) and writes it there,
// mode 0600 in a directory created 0700; two wraps starting at once end
// with the same key (the file is created exclusively, and the loser reads
// the winner's). The file is 64 hex digits and a newline; a file holding
// a gateway deployment's secret gives wrap that gateway's params_hash. A
// file that others may read or write is refused. No error holds the
// secret.
func loadParamsKey(getenv func(string) string) (audit.ParamsKey, string, error) {
	path, err := paramsKeyPath(getenv)
	if err != nil {
		return audit.ParamsKey{}, "", err
	}
	for range 2 {
		k, err := readParamsKey(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return k, path, err
		}
		fresh, err := audit.GenerateParamsKey()
		if err != nil {
			return audit.ParamsKey{}, path, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return audit.ParamsKey{}, path, fmt.Errorf("params key %s: %w", path, err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // another wrap made it first: read that one
		}
		if err != nil {
			return audit.ParamsKey{}, path, fmt.Errorf("params key %s: %w", path, err)
		}
		_, werr := f.WriteString(fresh.FormatSecret() + "\n")
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			_ = os.Remove(path)
			return audit.ParamsKey{}, path, fmt.Errorf("params key %s: cannot write it: %w", path, err)
		}
		return fresh, path, nil
	}
	return audit.ParamsKey{}, path, fmt.Errorf("params key %s: created and removed while starting", path)
}

// readParamsKey reads one key file.
func readParamsKey(path string) (audit.ParamsKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return audit.ParamsKey{}, err
	}
	if !st.Mode().IsRegular() {
		return audit.ParamsKey{}, fmt.Errorf("params key %s: not a regular file", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return audit.ParamsKey{}, fmt.Errorf("params key %s: mode %04o lets others read it; chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return audit.ParamsKey{}, err
	}
	k, err := audit.ParseParamsKey(string(b))
	if err != nil {
		return audit.ParamsKey{}, fmt.Errorf("params key %s: %w", path, err)
	}
	return k, nil
}

// paramsKey is the key of the log's records; the zero key without an
// audit log (nothing is recorded then).
func (a *auditLog) paramsKey() audit.ParamsKey {
	if a == nil {
		return audit.ParamsKey{}
	}
	return a.key
}
