package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestConsoleUsage: `aegis admin console` needs the deployed stack's URL
// and serves only on a loopback address (it acts with the operator's AWS
// credentials).
func TestConsoleUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "give --url"},
		{[]string{"--url", "https://abc.execute-api.us-east-1.amazonaws.com", "--addr", "0.0.0.0:8765"}, "--addr must be a loopback address"},
		{[]string{"--url", "https://abc.execute-api.us-east-1.amazonaws.com", "--addr", "example.com:8765"}, "--addr must be a loopback address"},
	} {
		var out, errb bytes.Buffer
		oldOut, oldErr := cliOut, cliErr
		cliOut, cliErr = &out, &errb
		code := cmdConsole(tc.args)
		cliOut, cliErr = oldOut, oldErr
		if code != 2 || !strings.Contains(errb.String(), tc.want) || out.Len() != 0 {
			t.Errorf("console %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}
