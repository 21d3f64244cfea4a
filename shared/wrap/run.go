// Package wrap is `aegis wrap`, the stdio enforcement boundary: it sits
// between an MCP client and a local stdio MCP server (the child), relays
// both streams, and, when asked, records and refuses tools/call requests.
//
// Without --policy and --audit, wrap is a transparent interposer: the client
// stream is byte-identical to talking to the child directly and wrap writes
// no JSON-RPC of its own. With --policy, a refused tools/call never reaches
// the child and is answered with the one frame wrap may author (-32042,
// data.aegis.layer "wrap"). With --audit, every tools/call decision is in
// the audit file before the call is forwarded or the refusal written.
// docs/wrap.md is the user's page; docs/design/wrap.md records the choices.
package wrap

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
)

// Exit codes of wrap itself; otherwise wrap exits with the child's status
// (128+N when the child was killed by signal N).
const (
	ExitUsage      = 2   // bad arguments, bad policy, unusable audit file
	ExitCannotExec = 126 // the command exists but could not be started
	ExitNotFound   = 127 // the command was not found
)

const usage = `usage: aegis wrap [--policy FILE [--roles LIST] [--pins FILE]] [--audit FILE [--audit-sync]] -- COMMAND [ARGS...]

Runs COMMAND (a stdio MCP server) and relays its stdin and stdout; stderr
passes through, signals are forwarded, and wrap exits with COMMAND's status.

  --policy FILE  YAML with deny:, approval: and optional allow: lists of
                 tool-name globs; a refused tools/call is answered with
                 error -32042 and never reaches COMMAND; or the
                 gateway's policy format (roles:, cedar_policies:,
                 policy_mode:, manifest:; server "local")
  --roles LIST   comma-separated roles of the local caller (policy format)
  --pins FILE    with --policy: pin each tool's definition the first time
                 COMMAND lists it (kept in FILE); a tools/call of a tool
                 COMMAND last listed otherwise is refused (-32042,
                 TOOL_POISONING)
  --audit FILE   append one JSON line per tools/call decision; the line is
                 in the file before the call is forwarded or refused
                 (survives any crash of wrap), and synced to disk
                 right after (at once on a clean exit)
  --audit-sync   also sync each record to disk before acting on it
                 (survives power loss; costs one fdatasync per call)

See docs/wrap.md.
`

// Run is `aegis wrap ARGS...`: args are what follows the word "wrap". It
// returns the process exit code. Run installs signal handlers for its
// duration and forwards those signals to the child, but for those wrap
// was started ignoring, which stay ignored in wrap and the child
// (forwarded); a SIGPIPE is caught unless ignored, so that a client that
// closes its end of stdout does not kill wrap.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	defer catchSIGPIPE()()
	fs := flag.NewFlagSet("aegis wrap", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	policyPath := fs.String("policy", "", "YAML policy file")
	rolesList := fs.String("roles", "", "comma-separated roles of the local caller (policy set format)")
	auditPath := fs.String("audit", "", "audit file (JSON lines, appended)")
	auditSync := fs.Bool("audit-sync", false, "fdatasync each record before acting on the decision")
	pinsPath := fs.String("pins", "", "pin file (with --policy): tool definitions pinned on first sight")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return ExitUsage
	}
	argv := fs.Args()
	if len(argv) == 0 {
		fmt.Fprint(stderr, "aegis wrap: no COMMAND given\n"+usage)
		return ExitUsage
	}

	g := &gate{policy: emptyPolicy}
	if *policyPath != "" {
		p, err := LoadPolicy(*policyPath)
		if err != nil {
			fmt.Fprintf(stderr, "aegis wrap: policy %s: %v\n", *policyPath, err)
			return ExitUsage
		}
		if *rolesList != "" {
			if err := p.SetRoles(strings.Split(*rolesList, ",")); err != nil {
				fmt.Fprintf(stderr, "aegis wrap: %v\n", err)
				return ExitUsage
			}
		}
		g.policy, g.enforce = p, true
	} else if *rolesList != "" || *pinsPath != "" {
		fmt.Fprint(stderr, "aegis wrap: --roles and --pins need --policy\n"+usage)
		return ExitUsage
	}
	if *pinsPath != "" {
		p, err := loadPins(*pinsPath)
		if err != nil {
			fmt.Fprintf(stderr, "aegis wrap: %v\n", err)
			return ExitUsage
		}
		p.warn = func(msg string) { fmt.Fprintf(stderr, "aegis wrap: %s\n", msg) }
		g.pins = p
	}
	if *auditPath != "" {
		a, err := openAudit(*auditPath, *auditSync)
		if err != nil {
			fmt.Fprintf(stderr, "aegis wrap: audit: %v\n", err)
			return ExitUsage
		}
		defer func() {
			if err := a.close(); err != nil {
				fmt.Fprintf(stderr, "aegis wrap: audit: %v\n", err)
			}
		}()
		g.audit = a
		g.warn = func(msg string) { fmt.Fprintf(stderr, "aegis wrap: audit: %s\n", msg) }
		a.warn = g.warn
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	// With nothing to decide or record and real files at both ends (the
	// CLI), the child inherits them: the client talks to it with no relay
	// at all, which is as transparent as an interposer can be. Otherwise
	// wrap sits on two pipes. (os.File's methods accept a nil *File.)
	inF, inOK := stdin.(*os.File)
	outF, outOK := stdout.(*os.File)
	direct := !g.enforce && g.audit == nil && inOK && outOK
	// The child leads its own process group, which gets every forwarded
	// signal, unless it may read a terminal (see childAttr): it is handed
	// one as stdin, or wrap is in the foreground of its controlling
	// terminal, which the child (ssh, sudo, gpg asking for a password) can
	// open as /dev/tty.
	ownGroup := !(direct && isTerminal(inF)) && !inForeground()
	cmd.SysProcAttr = childAttr(ownGroup)
	var childStdin, childIn, childStdout *os.File
	var childOut *outPipe
	if direct {
		cmd.Stdin, cmd.Stdout = inF, outF
	} else {
		var err error
		if childStdin, childIn, err = pipe(); err != nil {
			fmt.Fprintf(stderr, "aegis wrap: %v\n", err)
			return ExitCannotExec
		}
		var outR *os.File
		if outR, childStdout, err = pipe(); err == nil {
			if childOut, err = newOutPipe(outR); err != nil {
				outR.Close()
				childStdout.Close()
			}
		}
		if err != nil {
			childStdin.Close()
			childIn.Close()
			fmt.Fprintf(stderr, "aegis wrap: %v\n", err)
			return ExitCannotExec
		}
		cmd.Stdin, cmd.Stdout = childStdin, childStdout
	}
	sigs := make(chan os.Signal, 8)
	if fw := forwarded(); len(fw) > 0 {
		signal.Notify(sigs, fw...)
		defer signal.Stop(sigs)
	}
	err := cmd.Start()
	childStdin.Close() // the child's ends, now the child's alone
	childStdout.Close()
	if err != nil {
		childIn.Close()
		if childOut != nil {
			childOut.Close()
		}
		fmt.Fprintf(stderr, "aegis wrap: cannot start %s: %v\n", argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return ExitNotFound
		}
		return ExitCannotExec
	}
	if childOut != nil {
		defer childOut.Close()
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case s := <-sigs:
				signalChild(cmd.Process, s, ownGroup)
			case <-done:
				return
			}
		}
	}()

	if direct {
		return exitCode(cmd, cmd.Wait(), stderr)
	}
	relayed := make(chan struct{})
	if !g.enforce && g.audit == nil {
		// Nothing to decide or record: plain copies in both directions
		// (splice(2) between pipes on Linux).
		go func() {
			_ = copyLoop(childIn, stdin)
			childIn.Close()
		}()
		go func() {
			if copyLoop(stdout, childOut) != nil {
				_ = copyLoop(io.Discard, childOut) // client gone: keep the child unblocked
			}
			close(relayed)
		}()
	} else {
		out := &clientOut{w: stdout, pins: g.pins}
		g.child, g.out = &childSink{w: childIn}, out
		go func() {
			_ = g.run(stdin)
			childIn.Close()
		}()
		go func() {
			relayChild(out, childOut)
			close(relayed)
		}()
	}
	// The child's exit, not the end of its stdout, ends wrap: a process
	// the child started may keep that open (outPipe). What the child wrote
	// before it exited is still relayed in full, however slowly the
	// client reads it.
	err = cmd.Wait()
	childOut.childExited()
	<-relayed
	if g.out != nil {
		// A call decided as the child died gets its frame before wrap
		// exits, unless the gate is stuck writing to a stdin that a
		// process the child left holds and does not read.
		g.stop(quietAfterExit)
	}
	return exitCode(cmd, err, stderr)
}

// forwarded are the forwardedSignals wrap was not started ignoring. One
// that was (nohup ignores SIGHUP; a shell ignores SIGINT and SIGQUIT for
// a background job) stays ignored in wrap, and so in the child, which
// inherits an ignored disposition across exec: the child ignores it as it
// would started directly. Catching it (signal.Notify) would have reset it
// to the default in the child, and forwarding it would have killed the
// child (under nohup, a hang-up ended the server with status 129).
func forwarded() []os.Signal {
	var out []os.Signal
	for _, s := range forwardedSignals {
		if !signal.Ignored(s) {
			out = append(out, s)
		}
	}
	return out
}

// copyLoop copies src to dst until EOF, writing every read at once (no
// splice, no extra buffering), and reports the first write error.
func copyLoop(dst io.Writer, src io.Reader) error {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return nil
		}
	}
}

func exitCode(cmd *exec.Cmd, err error, stderr io.Writer) int {
	st := cmd.ProcessState
	if st == nil {
		fmt.Fprintf(stderr, "aegis wrap: %v\n", err)
		return ExitCannotExec
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
