package wrap

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"testing"
)

// Per-message latency, measured as a round trip through the mirror child:
// the client writes one line and reads its echo. "direct" talks to the
// child; the others go through wrap (a separate process, as in real use),
// or, as the baseline, through a bare relay process that only copies bytes.
// Wrap's overhead per relayed message is (wrapped − direct) / 2: each round
// trip crosses wrap twice. docs/perf/wrap.md has the figures.
func BenchmarkRelay(b *testing.B) {
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":"p-0001"}}}` + "\n"
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}` + "\n"
	denied := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"shell_exec","arguments":{"cmd":"id"}}}` + "\n"
	cases := []struct {
		name  string
		wrap  []string // nil: no wrap
		line  string
		reply string
	}{
		{"direct/message", nil, ping, ping},
		{"bare-relay/message", []string{"BARE"}, ping, ping},
		{"wrap-default/message", []string{}, ping, ping},
		{"wrap-policy-audit/message", []string{"--policy", "POLICY", "--audit", "AUDIT"}, ping, ping},
		{"direct/tools-call", nil, call, call},
		{"wrap-policy-audit/recorded-allowed-call", []string{"--policy", "POLICY", "--audit", "AUDIT"}, call, call},
		{"wrap-policy-audit/recorded-refused-call", []string{"--policy", "POLICY", "--audit", "AUDIT"}, denied, frame("3", "POLICY_DENIED", "shell_exec", "deny:shell_*")},
		{"wrap-policy-audit-sync/recorded-allowed-call", []string{"--policy", "POLICY", "--audit", "AUDIT", "--audit-sync"}, call, call},
		{"wrap-policy-audit-sync/recorded-refused-call", []string{"--policy", "POLICY", "--audit", "AUDIT", "--audit-sync"}, denied, frame("3", "POLICY_DENIED", "shell_exec", "deny:shell_*")},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			cmd, in, outp := startMirror(b, tc.wrap)
			defer outp.Close()
			r := bufio.NewReader(outp)
			roundTrip := func() {
				if _, err := io.WriteString(in, tc.line); err != nil {
					b.Fatal(err)
				}
				got, err := r.ReadString('\n')
				if err != nil || got != tc.reply {
					b.Fatalf("got %q, %v", got, err)
				}
			}
			for range 200 { // warm-up
				roundTrip()
			}
			b.ResetTimer()
			for b.Loop() {
				roundTrip()
			}
			b.StopTimer()
			in.Close()
			_ = cmd.Wait()
		})
	}
}

// Per-message cost when messages stream (a client that does not wait for
// each answer): one op is one message written by the client and read back
// from the mirror child.
func BenchmarkStream(b *testing.B) {
	ping := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":"p-0001"}}}` + "\n")
	for _, tc := range []struct {
		name string
		wrap []string
	}{
		{"direct", nil},
		{"bare-relay", []string{"BARE"}},
		{"wrap-default", []string{}},
		{"wrap-policy-audit", []string{"--policy", "POLICY", "--audit", "AUDIT"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cmd, in, outp := startMirror(b, tc.wrap)
			defer outp.Close()
			// One round trip first, so that starting the processes is not timed.
			if _, err := in.Write(ping); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(outp, make([]byte, len(ping))); err != nil {
				b.Fatal(err)
			}
			n := b.N
			b.ResetTimer()
			go func() {
				for range n {
					if _, err := in.Write(ping); err != nil {
						return
					}
				}
				in.Close()
			}()
			got, _ := io.Copy(io.Discard, outp)
			b.StopTimer()
			if got != int64(n*len(ping)) {
				b.Fatalf("read %d bytes, want %d", got, n*len(ping))
			}
			_ = cmd.Wait()
		})
	}
}

// The CPU cost of deciding one line in-process (no I/O).
func BenchmarkDecide(b *testing.B) {
	p, err := ParsePolicy([]byte(testPolicy))
	if err != nil {
		b.Fatal(err)
	}
	g := &gate{policy: p, enforce: true}
	for _, tc := range []struct{ name, line string }{
		{"ping", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":"p-0001"}}}` + "\n"},
		{"tools-call", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello, world"}}}` + "\n"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			line := []byte(tc.line)
			for b.Loop() {
				g.recs = g.recs[:0]
				g.decide(line, auditUp)
			}
		})
	}
}

// startMirror starts the mirror child, through wrap with the given flags
// unless wrapFlags is nil ("POLICY" and "AUDIT" stand for a test policy and
// a fresh audit file; a leading "BARE" puts the bare relay in wrap's place). The client's ends are blocking pipes too, so that
// the client's own wake-ups cost the same with and without wrap.
func startMirror(b *testing.B, wrapFlags []string) (cmd *exec.Cmd, in, out *os.File) {
	b.Helper()
	argv := childArgv(b, "mirror", "")
	if wrapFlags != nil {
		role := "wrap"
		if len(wrapFlags) > 0 && wrapFlags[0] == "BARE" {
			role, wrapFlags = "bare-relay", wrapFlags[1:]
		}
		argv = append([]string{self(b)}, wrapArgs(b, role, wrapFlags, argv)...)
	}
	cmd = exec.Command(argv[0], argv[1:]...)
	childIn, in, _ := pipe()
	out, childOut, _ := pipe()
	cmd.Stdin, cmd.Stdout = childIn, childOut
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	childIn.Close()
	childOut.Close()
	return cmd, in, out
}
