// Package dynamotest runs the DynamoDB API for tests: one moto_server per
// test binary on a free loopback port, started on first use, and a fresh
// pair of tables per Start.
//
// A package using it calls Main from its TestMain so the server is stopped
// (by its PID) when the tests end:
//
//	func TestMain(m *testing.M) { dynamotest.Main(m) }
//
// moto_server answers requests on threads and its UpdateItem is
// check-then-act without a lock, so concurrent conditional writes to one item
// can both pass their condition (measured: 32 of 100 parallel conditional
// ADDs admitted against a limit of 30). DynamoDB serializes writes to an
// item. To test against DynamoDB's guarantee, Endpoint is a loopback proxy
// that forwards one request at a time to moto_server.
//
// When moto_server cannot be started, Start fails the test, with or without
// CI, naming moto_server and how to install it (testtools.Missing): no test
// skips for a missing tool. scripts/test installs it first where it can.
package dynamotest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aegis-gw/aegis/internal/testtools"
	"github.com/aegis-gw/aegis/shared/dynamo"
)

// Env is a running DynamoDB API with a fresh pair of tables.
type Env struct {
	Endpoint string // http://127.0.0.1:PORT
	Tables   dynamo.Tables
}

var (
	once     sync.Once
	proc     *exec.Cmd
	exited   chan struct{} // closed when proc has been waited for
	endpoint string
	startErr error
	tableSeq atomic.Int64
)

// Main runs the tests and stops moto_server afterwards.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop kills the moto_server this process started, if any.
func Stop() {
	if proc != nil && proc.Process != nil {
		_ = proc.Process.Kill()
		<-exited
	}
}

// Endpoint starts moto_server once per test binary and returns its URL.
func Endpoint(t testing.TB) string {
	t.Helper()
	once.Do(func() { endpoint, startErr = start() })
	if startErr != nil {
		t.Fatalf("dynamotest: %s", testtools.Missing("moto_server", startErr))
	}
	return endpoint
}

func start() (string, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.SysProcAttr = sysProcAttr() // dies with us on Linux
	// What it prints before answering says why it did not start (say, a
	// pyenv shim for a Python that lacks moto); the rest is dropped.
	stderr := &prefixBuffer{max: 4096}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return "", err
	}
	proc = cmd
	exited = make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-exited:
			proc = nil
			return "", fmt.Errorf("%s exited before answering (%v): %s", bin, waitErr, stderr)
		default:
		}
		if time.Now().After(deadline) {
			Stop()
			proc = nil
			return "", fmt.Errorf("%s on port %d did not answer within 30s: %s", bin, port, stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return serialize(url)
}

// prefixBuffer keeps the first max bytes written to it.
type prefixBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (p *prefixBuffer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := p.max - len(p.b); n > 0 {
		p.b = append(p.b, b[:min(n, len(b))]...)
	}
	return len(b), nil
}

func (p *prefixBuffer) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.TrimSpace(string(p.b))
}

// serialize starts a loopback proxy that forwards one request at a time.
func serialize(target string) (string, error) {
	u, err := neturl.Parse(target)
	if err != nil {
		return "", err
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	var mu sync.Mutex
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), nil
}

// Start returns the running server with a fresh pair of tables.
func Start(t testing.TB) Env {
	t.Helper()
	e := Env{Endpoint: Endpoint(t)}
	n := tableSeq.Add(1)
	e.Tables = dynamo.Tables{
		State: fmt.Sprintf("state-%d-%d", os.Getpid(), n),
		Audit: fmt.Sprintf("audit-%d-%d", os.Getpid(), n),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamo.CreateTables(ctx, e.Client(t), e.Tables); err != nil {
		t.Fatalf("dynamotest: create tables: %v", err)
	}
	return e
}

// Load is the SDK configuration a test client uses: static credentials,
// us-east-1, no shared config files.
func Load() []func(*awsconfig.LoadOptions) error {
	return []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion("us-east-1"),
		awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		awsconfig.WithSharedConfigFiles([]string{}),
		awsconfig.WithSharedCredentialsFiles([]string{}),
	}
}

// OpTimeout is the per-operation deadline of the stores Store builds when
// the test sets none (dynamo.Options.OpTimeout), and the HTTP clients
// Client builds wait for an answer without a limit of their own. The proxy
// that serializes requests to moto_server (see the package doc) queues
// them: 100 parallel calls over two gateways wait seconds for their turn,
// which DynamoDB never makes a request do, and production's budgets
// (dynamo.DefaultOpTimeout, dynamo.ResponseHeaderTimeout) would cut them
// short and retry them. A test of the budgets sets its own, or builds its
// client with dynamo.NewClient.
const OpTimeout = 30 * time.Second

// Client returns a new client (its own connections) for e's endpoint, built
// like production's (dynamo.NewClient) except for the wait for an answer
// (see OpTimeout), with optFns applied.
func (e Env) Client(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	optFns = append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(e.Endpoint)
		o.HTTPClient = dynamo.NewHTTPClient().WithTransportOptions(func(tr *http.Transport) { tr.ResponseHeaderTimeout = 0 })
	}}, optFns...)
	c, err := dynamo.NewClient(context.Background(), Load(), optFns...)
	if err != nil {
		t.Fatalf("dynamotest: client: %v", err)
	}
	return c
}

// Store returns a new store (its own client) over e's tables; a zero
// o.OpTimeout is OpTimeout.
func (e Env) Store(t testing.TB, o dynamo.Options, optFns ...func(*dynamodb.Options)) *dynamo.Store {
	if o.OpTimeout == 0 {
		o.OpTimeout = OpTimeout
	}
	return dynamo.New(e.Client(t, optFns...), e.Tables, o)
}
