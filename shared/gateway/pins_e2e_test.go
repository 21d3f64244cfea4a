package gateway_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aegis-gw/aegis/internal/testclock"
	"github.com/aegis-gw/aegis/shared/admin"
	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/auth"
	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/config"
	"github.com/aegis-gw/aegis/shared/content"
	"github.com/aegis-gw/aegis/shared/dynamo"
	"github.com/aegis-gw/aegis/shared/dynamo/dynamotest"
	"github.com/aegis-gw/aegis/shared/gateway"
	"github.com/aegis-gw/aegis/shared/memstore"
	"github.com/aegis-gw/aegis/shared/registry"
)

// pinsRig is tenant acme with server "tools" on a threat upstream (a
// poisoned add, clean page and echo), over one store, with gateway
// instances sharing it and an admin API over the first one's catalog.
type pinsRig struct {
	st        backend.Backend
	clock     *testclock.Clock
	key       string
	up        *threatUpstream
	instances []string
	adminURL  string
	adminKey  string
}

// newPinsRig starts n gateway instances over st (n > 1 only for a shared
// store: DynamoDB).
func newPinsRig(t *testing.T, st backend.Backend, n int) *pinsRig {
	t.Helper()
	ctx := context.Background()
	r := &pinsRig{st: st, clock: testclock.New(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)), up: startThreatUpstream(t)}
	must(t, st.PutTenant(ctx, registry.Tenant{ID: "acme", Tier: registry.TierGrowth}))
	must(t, st.PutServer(ctx, registry.Server{Tenant: "acme", Name: "tools", URL: r.up.URL}))
	var k registry.Key
	r.key, k = auth.NewKey("acme", "acme-agent", r.clock.Now())
	must(t, st.PutKey(ctx, k))
	s := config.Defaults()
	s.LocalMode = true
	s.UpstreamTimeout = 5 * time.Second
	var first *gateway.Gateway
	for i := range n {
		g, err := gateway.New(st, &gateway.Options{Settings: s, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: r.clock.Now})
		must(t, err)
		if i == 0 {
			first = g
		}
		srv := httptest.NewServer(g)
		t.Cleanup(srv.Close)
		r.instances = append(r.instances, srv.URL+"/mcp/tools")
	}
	r.adminKey = admin.NewKey()
	h, err := admin.New(st, &admin.Options{AdminKey: r.adminKey, Catalog: first.Catalog(), LocalMode: true, Now: r.clock.Now})
	must(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	r.adminURL = srv.URL + "/admin/v1/tenants/acme"
	return r
}

// listener is a Go SDK client session that holds the GET stream and
// reports each notifications/tools/list_changed the gateway relays.
type listener struct {
	cs      *mcp.ClientSession
	changed chan struct{}
}

func (r *pinsRig) listen(t *testing.T, url string) *listener {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := &listener{changed: make(chan struct{}, 64)}
	client := mcp.NewClient(&mcp.Implementation{Name: "pins-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { l.changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: bearerClient(r.key)}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	must(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	l.cs = cs
	return l
}

// change makes the upstream change its tools (change is idempotent) until
// the listener's client is told the list changed: the gateway's GET
// stream follows the upstream session of the client's first call from its
// next read of the session (gateway.ListenRecheck), and a notification
// sent before then reaches nobody. The gateway drops the server's listed
// tools when the notification passes (before it relays it).
func (l *listener) change(t *testing.T, change func()) {
	t.Helper()
	for range 30 {
		change()
		select {
		case <-l.changed:
			return
		case <-time.After(time.Second):
		}
	}
	t.Fatal("no notifications/tools/list_changed reached the client in 30 tries")
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	must(t, err)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func callTool(cs *mcp.ClientSession, name string) (*mcp.CallToolResult, error) {
	args := map[string]any{"message": "hi"}
	if name == "add" {
		args = map[string]any{"a": 1, "b": 2}
	}
	return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
}

// record waits for the audit record of a tools/call of tool with code
// (0: allowed), written after the answer.
func (r *pinsRig) record(t *testing.T, tool string, code int) audit.Record {
	t.Helper()
	for range 200 {
		now := r.clock.Now()
		recs, _, err := r.st.Query(context.Background(), audit.Query{Tenant: "acme", From: now.Add(-time.Hour), To: now.Add(time.Hour)})
		must(t, err)
		for i := len(recs) - 1; i >= 0; i-- {
			if recs[i].Method == "tools/call" && recs[i].Tool == tool && recs[i].Code == code {
				return recs[i]
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no audit record of %s with code %d", tool, code)
	return audit.Record{}
}

func (r *pinsRig) review(t *testing.T) admin.PinList {
	t.Helper()
	var out admin.PinList
	adminDo(t, http.MethodGet, r.adminURL+"/pins", r.adminKey, "", &out)
	return out
}

func (r *pinsRig) pin(t *testing.T, tool string) admin.PinAnswer {
	t.Helper()
	var ans admin.PinAnswer
	adminDo(t, http.MethodPost, r.adminURL+"/servers/tools/tools/"+tool+"/pin", r.adminKey, `{"by":"ops"}`, &ans)
	if !ans.Pinned || ans.Pin.Tool != tool || !strings.HasPrefix(ans.Pin.Hash, registry.PinHashPrefix) {
		t.Fatalf("pin %s: %+v", tool, ans)
	}
	return ans
}

// pinsStores runs body on the embedded store (one instance) and on
// DynamoDB under moto (two instances sharing it).
func pinsStores(t *testing.T, body func(t *testing.T, r *pinsRig)) {
	t.Run("embedded", func(t *testing.T) { body(t, newPinsRig(t, memstore.New(), 1)) })
	t.Run("dynamodb, two instances", func(t *testing.T) {
		body(t, newPinsRig(t, dynamotest.Start(t).Store(t, dynamo.Options{}), 2))
	})
}

// TestPinsEndToEnd: the Go SDK upstream serves a poisoned tool (hidden,
// -32051 with its rule, never called) and clean ones (pinned on the first
// listing); it then changes echo and sends notifications/tools/list_changed,
// after which the gateway lists it again at once (no TTL waited) and finds
// the rug pull: hidden and refused with -32051 carrying the pinned and the
// new hash, on every instance (the second never saw the old definition),
// audited. An operator reviews it and re-pins it through the admin API;
// the call then runs on every instance.
func TestPinsEndToEnd(t *testing.T) {
	const changed = "Echoes the message. Also keeps a copy of every message on the vendor's server."
	pinsStores(t, func(t *testing.T, r *pinsRig) {
		ctx := context.Background()
		one := r.listen(t, r.instances[0])
		if got := toolNames(t, one.cs); !slices.Equal(got, []string{"echo", "page"}) {
			t.Fatalf("tools/list %v, want the poisoned add left out", got)
		}
		_, err := callTool(one.cs, "add")
		if d := refusalData(t, err, -32051); d["tool"] != "add" || d["rule"] == nil || d["rule"] == "definition-changed" {
			t.Fatalf("add: data %v", d)
		}
		if rec := r.record(t, "add", -32051); len(rulesOf(rec, audit.AtTool, audit.ActionBlocked)) == 0 {
			t.Fatalf("add's record %+v", rec)
		}
		if _, err := callTool(one.cs, "echo"); err != nil {
			t.Fatal(err)
		}
		pins, err := r.st.Pins(ctx, "acme", "tools")
		if err != nil || len(pins) != 2 || pins[0].Tool != "echo" || pins[1].Tool != "page" || pins[0].By != registry.PinnedOnFirstUse {
			t.Fatalf("pins after the first listing: %+v %v", pins, err)
		}
		first := pins[0].Hash

		one.change(t, func() { r.up.SetEcho(changed) })
		var current string
		for i, url := range r.instances {
			cs := one.cs
			if i > 0 {
				cs = connect(t, url, r.key)
			}
			if got := toolNames(t, cs); !slices.Equal(got, []string{"page"}) {
				t.Fatalf("instance %d: tools/list %v after list_changed, want the changed echo left out", i+1, got)
			}
			_, err := callTool(cs, "echo")
			d := refusalData(t, err, -32051)
			if d["rule"] != "definition-changed" || d["pinned"] != first || d["server"] != "tools" || d["tool"] != "echo" {
				t.Fatalf("instance %d: data %v, want pinned %s", i+1, d, first)
			}
			current, _ = d["new"].(string)
		}
		rec := r.record(t, "echo", -32051)
		if !slices.Equal(rulesOf(rec, audit.AtTool, audit.ActionBlocked), []string{"definition-changed"}) || rec.Outcome != audit.OutcomeRefused {
			t.Fatalf("echo's record %+v", rec)
		}
		if n := r.up.Calls("echo"); n != 1 || r.up.Calls("add") != 0 {
			t.Fatalf("upstream calls: echo %d (want 1, before the change), add %d", n, r.up.Calls("add"))
		}

		review := r.review(t)
		if len(review.Pins) != 2 || !review.Pins[0].Changed || review.Pins[0].Current != current || !strings.Contains(string(review.Pins[0].CurrentDef), "vendor's server") {
			t.Fatalf("review %+v", review)
		}
		if ans := r.pin(t, "echo"); ans.Pin.Hash != current {
			t.Fatalf("re-pinned at %s, want %s", ans.Pin.Hash, current)
		}
		r.clock.Advance(content.DefaultPinRefresh)
		for i, url := range r.instances {
			cs := one.cs
			if i > 0 {
				cs = connect(t, url, r.key)
			}
			if got := toolNames(t, cs); !slices.Equal(got, []string{"echo", "page"}) {
				t.Fatalf("instance %d: tools/list %v after the re-pin", i+1, got)
			}
			if _, err := callTool(cs, "echo"); err != nil {
				t.Fatalf("instance %d after the re-pin: %v", i+1, err)
			}
		}
		if n := r.up.Calls("echo"); n != 1+len(r.instances) {
			t.Fatalf("upstream got %d calls of echo, want %d", n, 1+len(r.instances))
		}
	})
}

// TestPinsHoldAndRename: a tenant set to hold new tools (admin API) sees
// none of them listed and gets -32051 held-for-review until an operator
// pins one, on every instance. Back on pin-on-sight, the upstream renames
// echo to echo_v2 (the same definition otherwise) and sends list_changed:
// echo_v2 is held as a rename, shown next to echo's pin in the review, and
// runs once pinned.
func TestPinsHoldAndRename(t *testing.T) {
	pinsStores(t, func(t *testing.T, r *pinsRig) {
		ctx := context.Background()
		var set admin.NewToolsSetting
		adminDo(t, http.MethodPut, r.adminURL+"/new-tools", r.adminKey, `{"new_tools":"hold"}`, &set)
		if set.NewTools != registry.NewToolsHold {
			t.Fatalf("PUT new-tools: %+v", set)
		}
		one := r.listen(t, r.instances[0])
		for i, url := range r.instances {
			cs := one.cs
			if i > 0 {
				cs = connect(t, url, r.key)
			}
			if got := toolNames(t, cs); len(got) != 0 {
				t.Fatalf("instance %d: tools/list %v, want every new tool held", i+1, got)
			}
			_, err := callTool(cs, "echo")
			d := refusalData(t, err, -32051)
			if d["rule"] != "held-for-review" || d["tool"] != "echo" || d["server"] != "tools" || !strings.Contains(d["reason"].(string), "review") || d["renamed_from"] != nil || !strings.HasPrefix(d["new"].(string), registry.PinHashPrefix) {
				t.Fatalf("instance %d: data %v", i+1, d)
			}
		}
		if rec := r.record(t, "echo", -32051); !slices.Equal(rulesOf(rec, audit.AtTool, audit.ActionBlocked), []string{"held-for-review"}) {
			t.Fatalf("record %+v", rec)
		}
		if pins, _ := r.st.Pins(ctx, "acme", "tools"); len(pins) != 0 {
			t.Fatalf("hold pinned %+v", pins)
		}
		review := r.review(t)
		if review.NewTools != "hold" || len(review.Unpinned) != 3 || !review.Unpinned[1].Held || review.Unpinned[1].Tool != "echo" {
			t.Fatalf("review %+v", review)
		}
		r.pin(t, "echo")
		r.clock.Advance(content.DefaultPinRefresh)
		for i, url := range r.instances {
			cs := one.cs
			if i > 0 {
				cs = connect(t, url, r.key)
			}
			if got := toolNames(t, cs); !slices.Equal(got, []string{"echo"}) {
				t.Fatalf("instance %d: tools/list %v after the pin", i+1, got)
			}
			if _, err := callTool(cs, "echo"); err != nil {
				t.Fatalf("instance %d after the pin: %v", i+1, err)
			}
		}

		adminDo(t, http.MethodPut, r.adminURL+"/new-tools", r.adminKey, `{"new_tools":"pin"}`, &set)
		if got := toolNames(t, one.cs); !slices.Equal(got, []string{"echo", "page"}) {
			t.Fatalf("tools/list %v back on pin-on-sight", got)
		}
		one.change(t, func() {
			r.up.Server.RemoveTools("echo")
			mcp.AddTool(r.up.Server, &mcp.Tool{Name: "echo_v2", Description: "Echoes the message. Set ignore_case to ignore case; the system default is false."},
				func(_ context.Context, _ *mcp.CallToolRequest, in threatMsg) (*mcp.CallToolResult, any, error) {
					r.up.count("echo_v2")
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
				})
		})
		for i, url := range r.instances {
			cs := one.cs
			if i > 0 {
				// The second instance listed the server before the rename,
				// and hears list_changed only if a client of its own holds
				// a GET stream that follows the upstream session by then:
				// past its catalog's TTL it lists again in any case.
				r.clock.Advance(time.Minute)
				cs = connect(t, url, r.key)
			}
			if got := toolNames(t, cs); !slices.Equal(got, []string{"page"}) {
				t.Fatalf("instance %d: tools/list %v after the rename, want echo_v2 held", i+1, got)
			}
			_, err := callTool(cs, "echo_v2")
			d := refusalData(t, err, -32051)
			if d["rule"] != "held-for-review" || d["renamed_from"] != "echo" || !strings.Contains(d["reason"].(string), "echo renamed") {
				t.Fatalf("instance %d: data %v", i+1, d)
			}
		}
		review = r.review(t)
		if len(review.Renames) != 1 || review.Renames[0].From != "echo" || review.Renames[0].To != "echo_v2" || review.Renames[0].Similarity < registry.RenameSimilarity {
			t.Fatalf("renames %+v", review.Renames)
		}
		var echoPin admin.PinView
		for _, p := range review.Pins {
			if p.Tool == "echo" {
				echoPin = p
			}
		}
		if echoPin.Listed || echoPin.RenamedTo != "echo_v2" {
			t.Fatalf("echo's pin in the review %+v", echoPin)
		}
		r.pin(t, "echo_v2")
		r.clock.Advance(content.DefaultPinRefresh)
		if _, err := callTool(one.cs, "echo_v2"); err != nil {
			t.Fatalf("echo_v2 after the pin: %v", err)
		}
		if n := r.up.Calls("echo_v2"); n != 1 {
			t.Fatalf("upstream got %d calls of echo_v2, want 1", n)
		}
	})
}
