package wiring

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestLoopbackEscape(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		allowed bool
		errHas  string
	}{
		{name: "unset", env: nil},
		{name: "on in the harness", env: map[string]string{EnvAllowLoopback: "1"}, allowed: true},
		{name: "any other value stops start-up", env: map[string]string{EnvAllowLoopback: "true"}, errHas: EnvAllowLoopback},
		{name: "refused with role credentials (real Lambda)", env: map[string]string{EnvAllowLoopback: "1", "AWS_SESSION_TOKEN": "IQoJb3JpZ2luX2Vj"}, errHas: "AWS_SESSION_TOKEN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&buf, nil))
			ok, err := allowLoopback(func(k string) string { return tc.env[k] }, log)
			if ok != tc.allowed {
				t.Errorf("allowed = %v, want %v", ok, tc.allowed)
			}
			if (err != nil) != (tc.errHas != "") || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
				t.Errorf("err = %v, want one naming %q", err, tc.errHas)
			}
			if logged := strings.Contains(buf.String(), `"level":"ERROR"`); logged != tc.allowed {
				t.Errorf("logged at ERROR: %v, want %v (%s)", logged, tc.allowed, buf.String())
			}
		})
	}
}
