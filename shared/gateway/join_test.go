package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/syncbuf"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/demo"
	"github.com/aegis-gw/aegis/shared/wrap"
)

// joinChildEnv makes this test binary the demo MCP server on stdio (see
// TestJoinChild): the child wrap runs in TestRecordsJoinOnParamsHash.
const joinChildEnv = "AEGIS_JOIN_CHILD"

// TestJoinChild is not a test: started by TestRecordsJoinOnParamsHash as
// wrap's child, with joinChildEnv set, it serves the demo MCP server (the
// one behind the gateway in the same test) on stdin and stdout. Otherwise
// it returns at once.
func TestJoinChild(t *testing.T) {
	if os.Getenv(joinChildEnv) != "1" {
		return
	}
	err := demo.NewMCPServer(func(string) {}).Run(context.Background(), &mcp.StdioTransport{})
	if err != nil && !strings.Contains(err.Error(), "EOF") {
		os.Exit(1)
	}
	os.Exit(0)
}

// TestRecordsJoinOnParamsHash: one tools/call through the gateway and the
// same call (as another client spells it: other id, spacing, member order)
// through `aegis wrap` to the same demo server, wrap holding the gateway's
// params key, give two records that join on params_hash (keyed, naming the
// key), agree on tool, outcome and policy_hash, and both validate.
// TestJoinNeedsTheKey: with another key they do not.
func TestRecordsJoinOnParamsHash(t *testing.T) {
	const args = `{"message":"hi"}`

	// The gateway, in front of the demo server over Streamable HTTP.
	up, err := demo.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	e := newUpEnv(t, up.URL, upOpts{})
	// wrap holds the deployment's params key: the gateway's, from its
	// store, exported to wrap's key file (docs/wrap.md, "The params key").
	keys, err := e.Store.ParamsKeys(context.Background())
	if err != nil || len(keys) != 1 {
		t.Fatalf("the gateway's params keys: %d, %v; want the one it made at start", len(keys), err)
	}
	key := keys[0].Key
	keyFile := filepath.Join(t.TempDir(), "params.key")
	if err := os.WriteFile(keyFile, []byte(key.FormatSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(wrap.EnvParamsKeyFile, keyFile)
	r := e.invoke(t, "echo", args)
	if r.code() != 0 || !strings.Contains(string(r.Result), `"text":"hi"`) {
		t.Fatalf("through the gateway: %s", r.Raw)
	}
	gw := e.Audit.await(t, r.Corr)

	// wrap, in front of the demo server over stdio.
	call := `{"jsonrpc":"2.0", "id":"via-wrap", "method":"tools/call", "params":{"arguments":{ "message" : "hi" }, "name":"echo"}}`
	file, answer := throughWrap(t, call)
	if !strings.Contains(answer, `"result"`) || !strings.Contains(answer, `"text":"hi"`) {
		t.Fatalf("through wrap the child answered %s", answer)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var wr wrap.Record
	if err := json.Unmarshal(b, &wr); err != nil {
		t.Fatalf("wrap's audit file %q: %v", b, err)
	}

	if err := gw.Validate(); err != nil {
		t.Errorf("gateway record %+v: %v", gw, err)
	}
	if err := wr.Validate(); err != nil {
		t.Errorf("wrap record %s: %v", b, err)
	}

	// The join: records grouped by params_hash.
	type side struct {
		layer, tool, policyHash string
		outcome                 audit.Outcome
	}
	byHash := map[string][]side{}
	byHash[gw.ParamsHash] = append(byHash[gw.ParamsHash], side{gw.Layer, gw.Tool, gw.PolicyHash, gw.Outcome})
	byHash[wr.ParamsHash] = append(byHash[wr.ParamsHash], side{wr.Layer, wr.Tool, wr.PolicyHash, wr.Outcome})
	want := key.Hash(json.RawMessage(args))
	joined := byHash[want]
	if len(byHash) != 1 || len(joined) != 2 {
		t.Fatalf("params_hash: gateway %s, wrap %s; want both %s", gw.ParamsHash, wr.ParamsHash, want)
	}
	if audit.ParamsHashKeyID(gw.ParamsHash) != key.ID() {
		t.Errorf("params_hash %s does not name the key %s", gw.ParamsHash, key.ID())
	}
	g, w := joined[0], joined[1]
	if g.layer != "gateway" || w.layer != "wrap" {
		t.Errorf("layers %q and %q", g.layer, w.layer)
	}
	if g.tool != "echo" || w.tool != g.tool {
		t.Errorf("tool: gateway %q, wrap %q; want echo", g.tool, w.tool)
	}
	if g.outcome != audit.OutcomeAllowed || w.outcome != g.outcome {
		t.Errorf("outcome: gateway %q, wrap %q; want allowed", g.outcome, w.outcome)
	}
	// Neither boundary has a policy in force here: both record the one
	// hash of the empty set, in the one format.
	if !audit.IsHash(g.policyHash) || !audit.IsHash(w.policyHash) || g.policyHash != audit.PolicyHashNone || w.policyHash != g.policyHash {
		t.Errorf("policy_hash: gateway %q, wrap %q; want both %s", g.policyHash, w.policyHash, audit.PolicyHashNone)
	}
}

// throughWrap runs `aegis wrap --audit FILE -- <the demo server>` in this
// process, initializes the child, sends call (a tools/call with a string
// id) and returns the audit file and the child's answer to it.
func throughWrap(t *testing.T, call string) (file, answer string) {
	t.Helper()
	t.Setenv(joinChildEnv, "1")
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	file = filepath.Join(t.TempDir(), "audit.jsonl")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncbuf.Buffer
	exit := make(chan int, 1)
	go func() {
		code := wrap.Run([]string{"--audit", file, "--", os.Args[0], "-test.run=^TestJoinChild$"}, inR, outW, &stderr)
		outW.Close()
		exit <- code
	}()
	var id struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.Unmarshal([]byte(call), &id)
	answers := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m struct {
				ID json.RawMessage `json:"id"`
			}
			if json.Unmarshal(sc.Bytes(), &m) == nil && string(m.ID) == string(id.ID) {
				answers <- sc.Text()
				break
			}
		}
		_, _ = io.Copy(io.Discard, outR)
		close(answers)
	}()
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"join","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		call,
	} {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatalf("write to wrap: %v; stderr %s", err, stderr.String())
		}
	}
	select {
	case answer = <-answers:
	case <-time.After(30 * time.Second):
		t.Fatalf("no answer through wrap; stderr %s", stderr.String())
	}
	inW.Close()
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("wrap exited %d; stderr %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("wrap did not exit; stderr %s", stderr.String())
	}
	return file, answer
}

// TestJoinNeedsTheKey: the same call through wrap with a key of its own
// (generated on first use) has another params_hash than the gateway's, so
// a record cannot be joined, or its arguments guessed, without the key.
func TestJoinNeedsTheKey(t *testing.T) {
	const args = `{"message":"hi"}`
	up, err := demo.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	e := newUpEnv(t, up.URL, upOpts{})
	r := e.invoke(t, "echo", args)
	gw := e.Audit.await(t, r.Corr)

	keyFile := filepath.Join(t.TempDir(), "aegis", "params.key") // absent: wrap makes it
	t.Setenv(wrap.EnvParamsKeyFile, keyFile)
	file, _ := throughWrap(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":`+args+`}}`)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var wr wrap.Record
	if err := json.Unmarshal(b, &wr); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(keyFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("wrap's generated key file: %v, %v; want mode 0600", st, err)
	}
	if wr.ParamsHash == gw.ParamsHash || audit.ParamsHashKeyID(wr.ParamsHash) == audit.ParamsHashKeyID(gw.ParamsHash) || !audit.IsParamsHash(wr.ParamsHash) {
		t.Fatalf("params_hash with two keys: gateway %s, wrap %s; want two keyed hashes naming two keys", gw.ParamsHash, wr.ParamsHash)
	}
}
