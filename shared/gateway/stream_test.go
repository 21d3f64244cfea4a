package gateway

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRelayID(t *testing.T) {
	for _, tc := range []struct {
		name, srv, id string
	}{
		{"number", "alpha", `1`},
		{"string", "beta", `"req-7"`},
		{"string with a colon", "alpha", `"a:b"`},
		{"large number", "alpha", `12345678901234567890`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rid := relayID(tc.srv, json.RawMessage(tc.id))
			srv, id, ok := unrelayID(rid)
			if !ok || srv != tc.srv || string(id) != tc.id {
				t.Fatalf("unrelayID(%s) = %q %s %v, want %q %s", rid, srv, id, ok, tc.srv, tc.id)
			}
		})
	}
	for _, bad := range []string{`1`, `"nocolon"`, `":1"`, `"alpha:not json"`, `null`, ``} {
		if srv, _, ok := unrelayID(json.RawMessage(bad)); ok {
			t.Errorf("unrelayID(%q) accepted, server %q", bad, srv)
		}
	}
}

func TestRelayMessage(t *testing.T) {
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"request gets a relayed id", `{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{}}`, `{"jsonrpc":"2.0","id":"alpha:3","method":"sampling/createMessage","params":{}}`},
		{"notification unchanged", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(relayMessage("alpha", []byte(tc.msg))); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestStream: a JSON answer stays JSON; an event before it turns the
// answer into an event stream that also carries the final frame; an event
// after a JSON answer is dropped.
func TestStream(t *testing.T) {
	for _, tc := range []struct {
		name        string
		events      []string
		afterEvents []string
		wantType    string
		wantBody    string
	}{
		{"json", nil, nil, "application/json", `{"result":1}`},
		{"events then answer", []string{`{"n":1}`, `{"n":2}`}, nil, "text/event-stream",
			"event: message\ndata: {\"n\":1}\n\nevent: message\ndata: {\"n\":2}\n\nevent: message\ndata: {\"result\":1}\n\n"},
		{"event after the json answer", nil, []string{`{"late":true}`}, "application/json", `{"result":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s := newStream(rec)
			for _, ev := range tc.events {
				if !s.Event([]byte(ev)) {
					t.Fatalf("event %s dropped", ev)
				}
			}
			writeFrame(s, 200, []byte(`{"result":1}`))
			for _, ev := range tc.afterEvents {
				if s.Event([]byte(ev)) {
					t.Fatalf("event %s after the answer was sent", ev)
				}
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tc.wantType) {
				t.Errorf("Content-Type %q, want %q", ct, tc.wantType)
			}
			if rec.Body.String() != tc.wantBody {
				t.Errorf("body %q, want %q", rec.Body.String(), tc.wantBody)
			}
		})
	}
}
