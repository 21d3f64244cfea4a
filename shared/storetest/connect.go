package storetest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-gw/aegis/shared/backend"
	"github.com/aegis-gw/aegis/shared/connect"
	"github.com/aegis-gw/aegis/shared/store"
)

func testConnections(t *testing.T, fresh func(*testing.T) backend.Backend) {
	b, c := fresh(t), ctx(t)
	conn := func(tenant, caller, server string, v int64) connect.Connection {
		return connect.Connection{ID: "c-" + caller + "-" + server, Tenant: tenant, Caller: caller, Server: server,
			Issuer: "https://as.example", Status: connect.StatusActive, Expires: t0.Add(time.Hour),
			Sealed: []byte{1, 0, 2, 0xff, byte(v)}, Version: v, Created: t0, Updated: t0}
	}
	if _, err := b.Connection(c, "acme", "alice", "docs"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Connection(absent) = %v; want ErrNotFound", err)
	}
	if err := b.PutConnection(c, conn("acme", "alice", "docs", 2)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("PutConnection v2 over nothing = %v; want ErrConflict", err)
	}
	for _, x := range []connect.Connection{conn("acme", "alice", "docs", 1), conn("acme", "bob", "docs", 1), conn("acme", "alice", "mail", 1), conn("other", "alice", "docs", 1)} {
		if err := b.PutConnection(c, x); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.PutConnection(c, conn("acme", "alice", "docs", 1)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("PutConnection v1 twice = %v; want ErrConflict", err)
	}
	got, err := b.Connection(c, "acme", "alice", "docs")
	if err != nil || got.ID != "c-alice-docs" || got.Version != 1 || string(got.Sealed) != string(conn("", "", "", 1).Sealed) || !got.Expires.Equal(t0.Add(time.Hour)) {
		t.Fatalf("Connection = %+v, %v", got, err)
	}
	// Rotation: of two writers of version 2, one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if b.PutConnection(c, conn("acme", "alice", "docs", 2)) == nil {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d writers of version 2 won; want 1", wins.Load())
	}
	list, err := b.Connections(c, "acme")
	if err != nil || len(list) != 3 {
		t.Fatalf("Connections(acme) = %d, %v; want 3", len(list), err)
	}
	for i, want := range [][2]string{{"alice", "docs"}, {"alice", "mail"}, {"bob", "docs"}} {
		if list[i].Caller != want[0] || list[i].Server != want[1] || list[i].Tenant != "acme" {
			t.Fatalf("Connections[%d] = %s/%s; want %v (by caller, then server; this tenant only)", i, list[i].Caller, list[i].Server, want)
		}
	}
	if err := b.DeleteConnection(c, "acme", "alice", "docs"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteConnection(c, "acme", "alice", "docs"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteConnection twice = %v; want ErrNotFound", err)
	}
	if _, err := b.Connection(c, "acme", "alice", "docs"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Connection after delete = %v", err)
	}
	if _, err := b.Connection(c, "other", "alice", "docs"); err != nil {
		t.Fatalf("another tenant's connection went with it: %v", err)
	}

	// Pending authorizations: opened once, taken once, never after expiry.
	now := time.Now()
	p := connect.Pending{State: "st-1", Tenant: "acme", Caller: "alice", Server: "docs", Verifier: "v", Redirect: "https://gw/cb",
		Resource: "https://up/mcp", Issuer: "https://as", AuthorizationEndpoint: "https://as/auth", TokenEndpoint: "https://as/token", Expires: now.Add(time.Minute)}
	if err := b.PutPending(c, p); err != nil {
		t.Fatal(err)
	}
	if err := b.PutPending(c, p); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("PutPending twice = %v; want ErrConflict", err)
	}
	if _, err := b.TakePending(c, "acme", "st-1", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TakePending before it was opened = %v; want ErrNotFound", err)
	}
	if _, err := b.OpenPending(c, "other", "st-1", "h", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("OpenPending in another tenant = %v; want ErrNotFound", err)
	}
	var opened atomic.Int32
	for range 4 {
		wg.Go(func() {
			if got, err := b.OpenPending(c, "acme", "st-1", "browser-hash", now); err == nil {
				opened.Add(1)
				if !got.Opened || got.Browser != "browser-hash" || got.Verifier != "v" || got.Caller != "alice" {
					t.Errorf("OpenPending = %+v", got)
				}
			} else if !errors.Is(err, store.ErrConflict) {
				t.Errorf("OpenPending again = %v; want ErrConflict", err)
			}
		})
	}
	wg.Wait()
	if opened.Load() != 1 {
		t.Fatalf("the link opened %d times; want once", opened.Load())
	}
	if _, err := b.TakePending(c, "acme", "st-1", now.Add(2*time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TakePending after expiry = %v; want ErrNotFound", err)
	}
	got2, err := b.TakePending(c, "acme", "st-1", now)
	if err != nil || got2.Browser != "browser-hash" || got2.TokenEndpoint != "https://as/token" {
		t.Fatalf("TakePending = %+v, %v", got2, err)
	}
	if _, err := b.TakePending(c, "acme", "st-1", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("TakePending twice = %v; want ErrNotFound", err)
	}
	p.State = "st-2"
	if err := b.PutPending(c, p); err != nil {
		t.Fatal(err)
	}
	if _, err := b.OpenPending(c, "acme", "st-2", "h", now.Add(2*time.Minute)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("OpenPending after expiry = %v; want ErrNotFound", err)
	}

	// Registered clients: one per (tenant, server, issuer), the first
	// stays.
	reg := connect.Registration{Tenant: "acme", Server: "docs", Issuer: "https://as.example", ClientID: "dyn-1", Sealed: []byte{9, 0, 8}, Created: t0}
	if _, err := b.Registration(c, "acme", "docs", "https://as.example"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Registration(absent) = %v; want ErrNotFound", err)
	}
	if err := b.PutRegistration(c, reg); err != nil {
		t.Fatal(err)
	}
	second := reg
	second.ClientID = "dyn-2"
	if err := b.PutRegistration(c, second); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("PutRegistration twice = %v; want ErrConflict", err)
	}
	for _, o := range []connect.Registration{
		{Tenant: "other", Server: "docs", Issuer: "https://as.example", ClientID: "dyn-3"},
		{Tenant: "acme", Server: "mail", Issuer: "https://as.example", ClientID: "dyn-4"},
		{Tenant: "acme", Server: "docs", Issuer: "https://as2.example", ClientID: "dyn-5"},
	} {
		if err := b.PutRegistration(c, o); err != nil {
			t.Fatalf("PutRegistration %+v = %v", o, err)
		}
	}
	got3, err := b.Registration(c, "acme", "docs", "https://as.example")
	if err != nil || got3.ClientID != "dyn-1" || string(got3.Sealed) != string(reg.Sealed) || !got3.Created.Equal(t0) {
		t.Fatalf("Registration = %+v, %v", got3, err)
	}
	cs, err := b.Connections(c, "acme")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range cs {
		if x.ID == "" || x.Caller == "" {
			t.Fatalf("a tenant's connections list a registration: %+v", x)
		}
	}
}
