// Package lambdatest runs a Lambda function's real bootstrap binary under the
// AWS Lambda Runtime Interface Emulator (aws-lambda-rie, a Go tool
// dependency of this module) and invokes it with recorded API Gateway
// events: the stand-in for `sam local invoke -e events/x.json` on machines
// without Docker or the SAM CLI.
//
//	bin := lambdatest.Build(t, "./functions/gateway")
//	fn := lambdatest.Start(t, bin, &lambdatest.Options{Env: map[string]string{"AEGIS_STATE_TABLE": "..."}})
//	res := fn.InvokeFile(t, "events/gateway/tools-call.json")
//	t.Logf("init %v", fn.InitDuration(t))
//
// Build compiles for the local architecture with the flags of the Makefile
// (CGO_ENABLED=0, -tags lambda.norpc, -trimpath, -ldflags='-s -w'). Start
// runs the emulator on free loopback ports with a hermetic environment (only
// the variables the Lambda service would set, and Options.Env), waits until
// it accepts connections, and stops it (and the bootstrap it started) by
// process id when the test ends. The function initialises on the first
// invocation, as on Lambda; InitDuration reads the emulator's
// "INIT REPORT(durationMs: ...)" line.
//
// When the emulator cannot be built or run, the test is skipped with a loud
// message, or fails when the environment variable CI is "true".
package lambdatest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/aegis-gw/aegis/internal/syncbuf"
)

// rieTool is the emulator's name as a Go tool dependency in go.mod.
const rieTool = "aws-lambda-rie"

// invokePath is the emulator's invocation endpoint (the Lambda Invoke API).
const invokePath = "/2015-03-31/functions/function/invocations"

// Unavailable fails the test because a local prerequisite (the emulator, a
// tool) is missing, naming it, with CI set or not: a missing tool never
// turns into a skip that reads as a pass.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	t.Fatalf("PREREQUISITE MISSING: %s", fmt.Sprintf(format, args...))
}

var moduleRoot = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module")
	}
	return filepath.Dir(gomod), nil
})

// ModuleRoot returns the directory of the main module's go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := moduleRoot()
	if err != nil {
		t.Fatalf("lambdatest: %v", err)
	}
	return dir
}

// Build compiles the main package pkg (an import path, or a path relative
// to the module root such as "./functions/gateway") into a file named
// bootstrap in a per-test directory, for the local OS and architecture, and
// returns its path. A compile error fails the test.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = ModuleRoot(t)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("lambdatest: go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

var rieBinary = sync.OnceValues(func() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	// `go tool -n` builds the tool into the build cache if needed and prints
	// its path, so the emulator runs as our direct child (its pid is ours to
	// stop) instead of under a `go tool` wrapper process.
	cmd := exec.Command("go", "tool", "-n", rieTool)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool -n %s: %v: %s", rieTool, err, strings.TrimSpace(stderr.String()))
	}
	path := strings.TrimSpace(string(out))
	if _, err := os.Stat(path); err != nil {
		return "", err
	}
	return path, nil
})

// Options configure Start. The zero value is usable.
type Options struct {
	// Env is the function's configuration (the template's Environment
	// Variables). The process gets these and the variables the Lambda
	// service sets, not the test's own environment.
	Env map[string]string
	// Timeout is the function timeout (AWS_LAMBDA_FUNCTION_TIMEOUT); the
	// invocation context's deadline. Default 15 s, the template's value.
	Timeout time.Duration
	// MemoryMB is reported to the function. Default 256.
	MemoryMB int
	// FunctionName is AWS_LAMBDA_FUNCTION_NAME. Default "test-function".
	FunctionName string
}

// Function is a bootstrap running under the emulator.
type Function struct {
	// URL is the emulator's invocation endpoint.
	URL string

	cmd    *exec.Cmd
	log    *syncbuf.Buffer
	exited chan struct{}
	client *http.Client
	stop   sync.Once
}

// Start runs bootstrap under aws-lambda-rie on free loopback ports and
// returns once the emulator accepts connections. The emulator and the
// bootstrap are stopped by process id in t.Cleanup.
func Start(t testing.TB, bootstrap string, o *Options) *Function {
	t.Helper()
	var opts Options
	if o != nil {
		opts = *o
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 15 * time.Second
	}
	if opts.MemoryMB <= 0 {
		opts.MemoryMB = 256
	}
	if opts.FunctionName == "" {
		opts.FunctionName = "test-function"
	}
	rie, err := rieBinary()
	if err != nil {
		Unavailable(t, "aws-lambda-rie cannot be built: %v", err)
	}
	abs, err := filepath.Abs(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	// A free port can be taken between our probe and the emulator's listen:
	// try again with fresh ports.
	var lastErr error
	for range 3 {
		f, err := start(t, rie, abs, opts)
		if err == nil {
			return f
		}
		lastErr = err
	}
	Unavailable(t, "aws-lambda-rie does not start: %v", lastErr)
	return nil
}

func start(t testing.TB, rie, bootstrap string, o Options) (*Function, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	emu := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	api := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	cmd := exec.Command(rie,
		"--runtime-interface-emulator-address", emu,
		"--runtime-api-address", api,
		bootstrap)
	cmd.Dir = filepath.Dir(bootstrap)
	cmd.Env = environment(o)
	log := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = 2 * time.Second
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &Function{
		URL:    "http://" + emu + invokePath,
		cmd:    cmd,
		log:    log,
		exited: make(chan struct{}),
		client: &http.Client{Timeout: o.Timeout + 10*time.Second},
	}
	go func() { _ = cmd.Wait(); close(f.exited) }()
	t.Cleanup(func() {
		f.Stop()
		if t.Failed() {
			t.Logf("aws-lambda-rie log (pid %d):\n%s", cmd.Process.Pid, f.Log())
		}
	})
	if err := f.waitReady(emu, 15*time.Second); err != nil {
		f.Stop()
		return nil, fmt.Errorf("%w\n%s", err, log.String())
	}
	return f, nil
}

// environment is what the Lambda service would give the process, plus the
// function's configuration.
func environment(o Options) []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"TZ=:UTC",
		"LANG=en_US.UTF-8",
		"AWS_REGION=us-east-1",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_LAMBDA_FUNCTION_NAME=" + o.FunctionName,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(o.MemoryMB),
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(int((o.Timeout+time.Second-1)/time.Second)),
	}
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}
	for k, v := range o.Env {
		env = append(env, k+"="+v)
	}
	return env
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (f *Function) waitReady(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case <-f.exited:
			return errors.New("aws-lambda-rie exited before accepting connections")
		default:
		}
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("aws-lambda-rie not listening on %s after %v", addr, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PID returns the emulator's process id.
func (f *Function) PID() int { return f.cmd.Process.Pid }

// Stop ends the emulator and the bootstrap it started: SIGTERM to the
// emulator (it kills its runtime), then, after a grace period, SIGKILL to
// the process group it leads. Safe to call more than once.
func (f *Function) Stop() {
	f.stop.Do(func() {
		terminate(f.cmd.Process)
		select {
		case <-f.exited:
		case <-time.After(3 * time.Second):
		}
		kill(f.cmd.Process) // anything left in the group, the bootstrap included
		<-f.exited
	})
}

// Log returns everything the emulator and the function wrote so far.
func (f *Function) Log() string { return f.log.String() }

// LogHas waits until the log holds every one of want, or limit passes,
// and returns the log. The emulator's output reaches the log through a
// pipe, so a line the function wrote may arrive after the answer that
// followed it.
func (f *Function) LogHas(want []string, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	for {
		log := f.Log()
		all := true
		for _, w := range want {
			all = all && strings.Contains(log, w)
		}
		if all || time.Now().After(deadline) {
			return log
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// InvokeRaw posts payload to the function and returns the raw result
// payload. A function error (a crash, a timeout, an error returned to the
// runtime) is returned as an error carrying the emulator's payload.
func (f *Function) InvokeRaw(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	res, err := f.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("emulator answered %s: %s", res.Status, body)
	}
	var fnErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if json.Unmarshal(body, &fnErr) == nil && fnErr.ErrorType != "" {
		return body, fmt.Errorf("function error %s: %s", fnErr.ErrorType, fnErr.ErrorMessage)
	}
	return body, nil
}

// Invoke posts an API Gateway HTTP API (2.0) event and decodes the
// function's response. Any failure fails the test, with the emulator's log.
func (f *Function) Invoke(t testing.TB, event []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	body, err := f.InvokeRaw(t.Context(), event)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var res events.APIGatewayV2HTTPResponse
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("invoke: the result is not an API Gateway 2.0 response: %v\n%s", err, body)
	}
	if res.StatusCode == 0 {
		t.Fatalf("invoke: the result has no statusCode:\n%s", body)
	}
	return res
}

// InvokeFile is Invoke with the event read from path (relative to the
// test's package directory, as usual in Go tests).
func (f *Function) InvokeFile(t testing.TB, path string) events.APIGatewayV2HTTPResponse {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return f.Invoke(t, b)
}

var initReport = regexp.MustCompile(`INIT REPORT\([^)]*durationMs: ([0-9.]+)`)

// InitDuration returns the function's initialisation time as the emulator
// measured it (its "INIT REPORT(durationMs: ...)" line: process start to
// the runtime's first request for work, which is what Lambda bills as
// Init Duration). The function initialises on its first invocation, so call
// this after Invoke; it fails the test if no report appears.
func (f *Function) InitDuration(t testing.TB) time.Duration {
	t.Helper()
	d, ok := f.initDuration()
	for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // the log is copied from a pipe
		d, ok = f.initDuration()
	}
	if !ok {
		t.Fatalf("no INIT REPORT in the emulator's log (invoke first):\n%s", f.Log())
	}
	return d
}

func (f *Function) initDuration() (time.Duration, bool) {
	m := initReport.FindStringSubmatch(f.Log())
	if m == nil {
		return 0, false
	}
	ms, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}
