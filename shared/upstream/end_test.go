package upstream

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/registry"
)

// deletes records the DELETEs an upstream gets and answers them with status.
type deletes struct {
	mu     sync.Mutex
	got    []http.Header
	status int
	hold   chan struct{} // when set, answers wait for it
}

func (d *deletes) server(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if d.hold != nil {
			select {
			case <-d.hold:
			case <-r.Context().Done():
			}
		}
		d.mu.Lock()
		d.got = append(d.got, r.Header.Clone())
		status := d.status
		d.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

func TestEnd(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		status int
		ok     bool
	}{
		{"ended", http.StatusNoContent, true},
		{"already gone", http.StatusNotFound, true},
		{"not allowed by the upstream", http.StatusMethodNotAllowed, true},
		{"upstream failure", http.StatusInternalServerError, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &deletes{status: tc.status}
			srv := &registry.Server{Name: "demo", URL: d.server(t), Credential: &registry.Credential{Header: "X-Api-Key", Ref: "env:K"}}
			c := &Client{HTTP: http.DefaultClient, Creds: staticCreds("s3cret\n")}
			err := c.End(ctx, srv, Session{ID: "up-1", Protocol: "2025-11-25"})
			if (err == nil) != tc.ok {
				t.Fatalf("End = %v; want ok %v", err, tc.ok)
			}
			if len(d.got) != 1 {
				t.Fatalf("%d DELETEs; want 1", len(d.got))
			}
			h := d.got[0]
			if h.Get("Mcp-Session-Id") != "up-1" || h.Get("MCP-Protocol-Version") != "2025-11-25" || h.Get("X-Api-Key") != "s3cret" {
				t.Errorf("DELETE headers = %v", h)
			}
		})
	}
	t.Run("no session id", func(t *testing.T) {
		d := &deletes{status: http.StatusNoContent}
		c := &Client{HTTP: http.DefaultClient}
		if err := c.End(ctx, &registry.Server{URL: d.server(t)}, Session{Protocol: ModernProtocol}); err != nil || len(d.got) != 0 {
			t.Fatalf("End = %v after %d DELETEs; want nothing sent", err, len(d.got))
		}
	})
	t.Run("bounded", func(t *testing.T) {
		var deadline time.Time
		rt := roundTrip(func(r *http.Request) (*http.Response, error) {
			deadline, _ = r.Context().Deadline()
			return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
		})
		c := &Client{HTTP: &http.Client{Transport: rt}}
		if err := c.End(ctx, &registry.Server{URL: "http://upstream.test/mcp"}, Session{ID: "up-1"}); err != nil {
			t.Fatal(err)
		}
		if end := time.Now(); deadline.IsZero() || deadline.After(end.Add(EndTimeout)) {
			t.Fatalf("DELETE sent with deadline %v; want one within %v", deadline, EndTimeout)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		d := &deletes{status: http.StatusNoContent, hold: make(chan struct{})}
		defer close(d.hold)
		c := &Client{HTTP: http.DefaultClient}
		tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		err := c.End(tctx, &registry.Server{URL: d.server(t)}, Session{ID: "up-1", Protocol: "2025-11-25"})
		var te *TimeoutError
		if !errors.As(err, &te) {
			t.Fatalf("End = %v; want a timeout", err)
		}
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type servers []registry.Server

func (s servers) Servers(context.Context, string) ([]registry.Server, error) { return s, nil }

// EndSessions ends each registered server's session of a gateway session.
func TestEndSessions(t *testing.T) {
	a, b := &deletes{status: http.StatusNoContent}, &deletes{status: http.StatusInternalServerError}
	list := servers{{Name: "a", URL: a.server(t)}, {Name: "b", URL: b.server(t)}, {Name: "c", URL: "http://127.0.0.1:1/mcp"}}
	c := &Client{HTTP: http.DefaultClient}
	ups := map[string]string{
		"a":    Session{ID: "up-a", Protocol: "2025-11-25"}.Encode(),
		"b":    Session{ID: "up-b", Protocol: "2025-11-25"}.Encode(),
		"gone": Session{ID: "up-x", Protocol: "2025-11-25"}.Encode(), // no longer registered
	}
	c.EndSessions(context.Background(), list, "acme", ups, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if len(a.got) != 1 || a.got[0].Get("Mcp-Session-Id") != "up-a" || len(b.got) != 1 || b.got[0].Get("Mcp-Session-Id") != "up-b" {
		t.Fatalf("DELETEs: a %v, b %v", a.got, b.got)
	}
}
