package wrap

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/aegis-gw/aegis/shared/auditchain"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/syncbuf"
)

// The test binary doubles as every process the tests need, chosen by its
// first argument: the wrap CLI itself, a mirror child and a real MCP server.
// No `go build` step, and the children run under the race detector too.
const roleFlag = "-wraptest-role="

func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		if role, ok := strings.CutPrefix(os.Args[1], roleFlag); ok {
			os.Exit(runRole(role, os.Args[2:]))
		}
	}
	// Children built with -race sleep 1 s at exit by default; not ours.
	os.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	// Every wrap (and child) of the tests keys params_hash with
	// testParamsKey, never with a key in the user's configuration directory.
	if os.Getenv(EnvParamsKeyFile) == "" {
		dir, err := os.MkdirTemp("", "aegis-wrap-test-key")
		if err != nil {
			panic(err)
		}
		path := dir + "/params.key"
		if err := os.WriteFile(path, []byte(testParamsKey.FormatSecret()+"\n"), 0o600); err != nil {
			panic(err)
		}
		os.Setenv(EnvParamsKeyFile, path)
		// and sign audit checkpoints with a key made here.
		os.Setenv(auditchain.EnvKeyFile, dir+"/audit-ed25519.key")
		code := m.Run()
		os.RemoveAll(dir)
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func runRole(role string, args []string) int {
	switch role {
	case "wrap":
		return Run(args, os.Stdin, os.Stdout, os.Stderr)
	case "bare-relay":
		// A bare relay for the benchmarks' baseline: wrap with nothing to
		// decide, made to relay (streams that are not files), so it is two
		// goroutines copying bytes and nothing else.
		return Run(args, struct{ io.Reader }{os.Stdin}, struct{ io.Writer }{os.Stdout}, os.Stderr)
	case "mirror":
		return mirror(args)
	case "mcpserver":
		return mcpServer(args)
	case "pinserver":
		return pinServer(args)
	case "forker":
		return forker(args)
	case "sleeper":
		// Writes its pid to args[0] and sleeps: a grandchild that only a
		// signal to its process group can end.
		if err := os.WriteFile(args[0], []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return 98
		}
		time.Sleep(time.Hour)
		return 0
	case "ttychild":
		return ttyChild()
	case "exit":
		var n int
		fmt.Sscan(args[0], &n)
		fmt.Fprint(os.Stderr, "child stderr line\n")
		return n
	}
	if f, ok := platformRoles[role]; ok {
		return f(args)
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 99
}

// platformRoles are roles defined by tests built only on some systems.
var platformRoles = map[string]func(args []string) int{}

// mirror is the byte-for-byte child: it appends every chunk it reads to the
// file args[0] (what the child received), then writes it back unchanged.
// At the end of its stdin it exits with status args[1] (default 0).
func mirror(args []string) int {
	status := 0
	if len(args) > 1 {
		status, _ = strconv.Atoi(args[1])
	}
	var seen *os.File
	if len(args) > 0 && args[0] != "" {
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return 98
		}
		seen = f
	}
	buf := make([]byte, 256<<10)
	for {
		n, err := os.Stdin.Read(buf)
		if n > 0 {
			if seen != nil {
				if _, err := seen.Write(buf[:n]); err != nil {
					return 97
				}
			}
			if _, err := os.Stdout.Write(buf[:n]); err != nil {
				return 96
			}
		}
		if err != nil {
			return status
		}
	}
}

// mcpServer is a real stdio MCP server built with the Go SDK. Every tool
// it runs is appended to the file args[0], so a test can check on the
// child's side what was executed.
func mcpServer(args []string) int {
	var mu sync.Mutex
	ran := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(args[0], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			fmt.Fprintln(f, name)
			f.Close()
		}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "wraptest", Version: "1"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	for _, name := range []string{"echo", "shell_exec", "pay_invoice"} {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "test tool " + name},
			func(_ context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
				ran(name)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + a.Text}}}, nil, nil
			})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// forker is a child that starts a grandchild (the sleeper role, pid file
// args[0]) and waits for it, as `sh -c 'sleep 27; echo after'` does.
func forker(args []string) int {
	self, err := os.Executable()
	if err != nil {
		return 98
	}
	cmd := exec.Command(self, roleFlag+"sleeper", args[0])
	if err := cmd.Start(); err != nil {
		return 97
	}
	_ = cmd.Wait()
	// Only a signal ends the forker: returning here, when the grandchild
	// died of the same signal first, would race the Go runtime's own exit
	// on that signal and could exit 0 (seen once under a loaded suite).
	time.Sleep(time.Hour)
	return 0
}

// ttyChild echoes every line of stdin and prints "SIGINT" for each SIGINT
// it receives; 300 ms after the first one it exits with status 7.
func ttyChild() int {
	ints := make(chan os.Signal, 8)
	signal.Notify(ints, syscall.SIGINT)
	go func() {
		_, _ = io.Copy(os.Stdout, os.Stdin)
	}()
	<-ints
	fmt.Println("SIGINT")
	deadline := time.After(300 * time.Millisecond)
	for {
		select {
		case <-ints:
			fmt.Println("SIGINT")
		case <-deadline:
			return 7
		}
	}
}

// self is the path of the test binary.
func self(t testing.TB) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// childArgv is the argv of the test binary in role, for use after "--".
// wrapArgs is the arguments of the test binary in a wrap role ("wrap" or
// "bare-relay") with flags, where "POLICY" stands for the test policy and
// "AUDIT" for a fresh audit file, then "--" and the child's argv.
func wrapArgs(t testing.TB, role string, flags []string, child []string) []string {
	t.Helper()
	args := []string{roleFlag + role}
	for _, f := range flags {
		switch f {
		case "POLICY":
			f = writeFile(t, "policy.yaml", testPolicy)
		case "AUDIT":
			f = filepath.Join(t.TempDir(), "audit.jsonl")
		}
		args = append(args, f)
	}
	return append(append(args, "--"), child...)
}

func childArgv(t testing.TB, role string, args ...string) []string {
	return append([]string{self(t), roleFlag + role}, args...)
}

func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runAll runs wrap in-process with all of input on stdin and returns
// everything it wrote to stdout, its stderr and its exit code.
func runAll(t *testing.T, args []string, input []byte) ([]byte, string, int) {
	t.Helper()
	var out bytes.Buffer
	var errb syncbuf.Buffer
	code := Run(args, bytes.NewReader(input), &out, &errb)
	return out.Bytes(), errb.String(), code
}

// live is wrap running in-process on real pipes, driven one line at a time.
type live struct {
	t     *testing.T
	in    *os.File // client → wrap
	out   *bufio.Reader
	code  chan int
	errb  *syncbuf.Buffer
	close func()
}

func startLive(t *testing.T, args []string) *live {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	l := &live{t: t, in: inW, out: bufio.NewReaderSize(outR, 1<<20), code: make(chan int, 1), errb: &syncbuf.Buffer{}}
	go func() {
		l.code <- Run(args, inR, outW, l.errb)
		outW.Close()
	}()
	var once sync.Once
	l.close = func() {
		once.Do(func() {
			inW.Close()
		})
	}
	t.Cleanup(func() {
		l.close()
		<-l.code
		inR.Close()
		outR.Close()
	})
	return l
}

func (l *live) send(s string) {
	l.t.Helper()
	if _, err := io.WriteString(l.in, s); err != nil {
		l.t.Fatal(err)
	}
}

func (l *live) recv() string {
	l.t.Helper()
	s, err := l.out.ReadString('\n')
	if err != nil {
		l.t.Fatalf("reading from wrap: %v (got %q); stderr: %s", err, s, l.errb.String())
	}
	return s
}

// wait closes stdin and returns wrap's exit code.
func (l *live) wait() int {
	l.close()
	c := <-l.code
	l.code <- c
	return c
}
