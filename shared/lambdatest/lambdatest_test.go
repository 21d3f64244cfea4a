//go:build unix

package lambdatest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestRecordedEventsUnderRIE builds testdata/echofn (a Lambda main serving a
// trivial handler through shared/apigw), runs it under aws-lambda-rie and
// invokes it with recorded API Gateway events.
func TestRecordedEventsUnderRIE(t *testing.T) {
	bin := Build(t, "./shared/lambdatest/testdata/echofn")
	st, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("echofn bootstrap: %d bytes (%.1f MB)", st.Size(), float64(st.Size())/(1<<20))

	fn := Start(t, bin, &Options{Env: map[string]string{"ECHOFN_GREETING": "hello from the harness"}})

	type seen struct {
		Greeting   string `json:"greeting"`
		Method     string `json:"method"`
		Path       string `json:"path"`
		RemoteAddr string `json:"remoteAddr"`
		BodyBytes  int    `json:"bodyBytes"`
		RequestID  string `json:"requestId"`
		Deadline   bool   `json:"deadline"`
	}
	tests := []struct {
		event string
		want  seen
	}{
		{"mcp-post.json", seen{"hello from the harness", "POST", "/mcp", "198.51.100.23:0", 135, "TqZ1uj2LoAMEVfQ=", true}},
		{"invoke-named-stage.json", seen{"hello from the harness", "POST", "/v1/invoke", "[2001:db8::7]:0", 74, "TqaDHhb5oAMEJmw=", true}},
	}
	for i, tt := range tests {
		res := fn.InvokeFile(t, filepath.Join("testdata", "events", tt.event))
		if res.StatusCode != 200 || res.Headers["Content-Type"] != "application/json" || res.IsBase64Encoded {
			t.Errorf("%s: status %d headers %v base64 %v", tt.event, res.StatusCode, res.Headers, res.IsBase64Encoded)
		}
		if !slices.Equal(res.Cookies, []string{"echo=1; Path=/"}) {
			t.Errorf("%s: cookies = %q", tt.event, res.Cookies)
		}
		var got seen
		if err := json.Unmarshal([]byte(res.Body), &got); err != nil {
			t.Fatalf("%s: body %q: %v", tt.event, res.Body, err)
		}
		if got != tt.want {
			t.Errorf("%s: handler saw %+v, want %+v", tt.event, got, tt.want)
		}
		if i == 0 {
			t.Logf("echofn INIT duration under aws-lambda-rie: %v", fn.InitDuration(t))
		}
	}

	// An event the runtime cannot decode is a function error, not a response.
	if _, err := fn.InvokeRaw(t.Context(), []byte(`"not an event"`)); err == nil {
		t.Error("InvokeRaw: want a function error for an undecodable event")
	} else {
		t.Logf("function error, as expected: %v", err)
	}

	pid := fn.PID()
	fn.Stop()
	// The emulator led its own process group, the bootstrap included.
	if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d (emulator and bootstrap) still exists after Stop: %v", pid, err)
	}
}

// recorder captures how Unavailable ends a test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatalf(format string, a ...any) { r.fatal = fmt.Sprintf(format, a...) }
func (r *recorder) Skipf(format string, a ...any)  { r.skip = fmt.Sprintf(format, a...) }

func TestUnavailableFails(t *testing.T) {
	for _, ci := range []string{"true", ""} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		Unavailable(r, "aws-lambda-rie cannot be built: %s", "boom")
		if r.skip != "" || !strings.Contains(r.fatal, "PREREQUISITE MISSING") || !strings.Contains(r.fatal, "boom") {
			t.Errorf("CI=%q: fatal %q skip %q; want a failure naming what is missing", ci, r.fatal, r.skip)
		}
	}
}
