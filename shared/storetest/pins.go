package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/store"
)

// NewPinStore returns an empty pin store for one test.
type NewPinStore func(t *testing.T) registry.PinStore

// Pins is the contract of registry.PinStore, run on both stores: trust on
// first use keeps the first pin, two pinning at once agree, an operator's
// PutPin replaces, DeletePin forgets (store.ErrNotFound when absent),
// listing is per tenant, filtered by server, sorted; each kind of pin is
// its own entry (PinKinds); SwapPin replaces only the pin as it was read.
func Pins(t *testing.T, nps NewPinStore) {
	s, c := nps(t), ctx(t)
	def := json.RawMessage(`{"description":"Adds two numbers.","name":"add"}`)
	first := registry.Pin{Tenant: "acme", Server: "tools", Tool: "add", Hash: "sha256:aa", Def: def, By: registry.PinnedOnFirstUse, At: t0}
	got, err := s.PinIfAbsent(c, first)
	if err != nil || !reflect.DeepEqual(got, first) {
		t.Fatalf("PinIfAbsent(new) = %+v, %v", got, err)
	}
	changed := first
	changed.Hash, changed.At = "sha256:bb", t0.Add(1)
	if got, err := s.PinIfAbsent(c, changed); err != nil || !reflect.DeepEqual(got, first) {
		t.Fatalf("PinIfAbsent(changed) = %+v, %v; want the first pin kept", got, err)
	}

	// Two instances pinning one new tool at once agree on one pin.
	var wg sync.WaitGroup
	res := make([]registry.Pin, 8)
	for i := range res {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := registry.Pin{Tenant: "acme", Server: "tools", Tool: "race", Hash: "sha256:" + string(rune('a'+i)), By: registry.PinnedOnFirstUse, At: t0}
			res[i], _ = s.PinIfAbsent(c, p)
		}()
	}
	wg.Wait()
	for _, p := range res[1:] {
		if p.Hash != res[0].Hash {
			t.Fatalf("concurrent PinIfAbsent disagree: %q and %q", res[0].Hash, p.Hash)
		}
	}

	other := registry.Pin{Tenant: "acme", Server: "docs", Tool: "search", Hash: "sha256:cc", By: "ops", At: t0}
	beta := registry.Pin{Tenant: "beta", Server: "tools", Tool: "add", Hash: "sha256:dd", By: "ops", At: t0}
	for _, p := range []registry.Pin{other, beta} {
		if err := s.PutPin(c, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutPin(c, changed); err != nil {
		t.Fatal(err)
	}
	list, err := s.Pins(c, "acme", "")
	if err != nil || len(list) != 3 || list[0].Server != "docs" || list[1].Tool != "add" || list[2].Tool != "race" {
		t.Fatalf("Pins(acme) = %+v, %v; want docs/search, tools/add, tools/race", list, err)
	}
	if list[1].Hash != "sha256:bb" || string(list[1].Def) != string(def) {
		t.Fatalf("PutPin did not replace: %+v", list[1])
	}
	if list, err := s.Pins(c, "acme", "docs"); err != nil || !reflect.DeepEqual(list, []registry.Pin{other}) {
		t.Fatalf("Pins(acme, docs) = %+v, %v", list, err)
	}
	if err := s.DeletePin(c, "acme", "tools", registry.PinTool, "add"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePin(c, "acme", "tools", registry.PinTool, "add"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeletePin(absent) = %v, want store.ErrNotFound", err)
	}
	if got, err := s.PinIfAbsent(c, changed); err != nil || got.Hash != "sha256:bb" {
		t.Fatalf("PinIfAbsent after DeletePin = %+v, %v", got, err)
	}
	if list, err := s.Pins(c, "beta", ""); err != nil || !reflect.DeepEqual(list, []registry.Pin{beta}) {
		t.Fatalf("Pins(beta) = %+v, %v", list, err)
	}
	pinKinds(t, s)
}

// pinKinds: one name pinned as each kind is four pins, listed tools
// first, deleted one by one; SwapPin replaces the pin as read and keeps
// one that changed since.
func pinKinds(t *testing.T, s registry.PinStore) {
	c := ctx(t)
	var want []registry.Pin
	for i, kind := range registry.PinKinds {
		p := registry.Pin{Tenant: "kinds", Server: "s", Kind: kind, Tool: "x#1", Hash: "v2:sha256:" + string(rune('a'+i)), By: registry.PinnedOnFirstUse, At: t0}
		if got, err := s.PinIfAbsent(c, p); err != nil || !reflect.DeepEqual(got, p) {
			t.Fatalf("PinIfAbsent(%q) = %+v, %v: another kind's pin taken for it", kind, got, err)
		}
		want = append(want, p)
	}
	if list, err := s.Pins(c, "kinds", "s"); err != nil || !reflect.DeepEqual(list, want) {
		t.Fatalf("Pins(kinds) = %+v, %v; want one per kind, tools first", list, err)
	}

	legacy := registry.Pin{Tenant: "kinds", Server: "s", Tool: "old", Hash: "sha256:aa", Def: json.RawMessage(`{"name":"old"}`), By: "ops", At: t0}
	if err := s.PutPin(c, legacy); err != nil {
		t.Fatal(err)
	}
	read, err := s.Pins(c, "kinds", "s")
	if err != nil || len(read) != 5 || read[0].Tool != "old" {
		t.Fatalf("Pins after the legacy pin: %+v, %v", read, err)
	}
	upgraded := read[0]
	upgraded.Hash, upgraded.Def = "v2:sha256:bb", json.RawMessage(`{"name":"old","title":"Old"}`)
	if got, err := s.SwapPin(c, read[0], upgraded); err != nil || !reflect.DeepEqual(got, upgraded) {
		t.Fatalf("SwapPin(as read) = %+v, %v", got, err)
	}
	if got, err := s.SwapPin(c, read[0], registry.Pin{Tenant: "kinds", Server: "s", Tool: "old", Hash: "v2:sha256:cc", By: "late", At: t0}); err != nil || !reflect.DeepEqual(got, upgraded) {
		t.Fatalf("SwapPin(stale) = %+v, %v; want the pin in force kept", got, err)
	}
	if _, err := s.SwapPin(c, read[0], registry.Pin{Tenant: "kinds", Server: "s", Tool: "none", Hash: "v2:sha256:dd"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SwapPin(absent) = %v, want store.ErrNotFound", err)
	}
	for _, kind := range registry.PinKinds {
		if err := s.DeletePin(c, "kinds", "s", kind, "x#1"); err != nil {
			t.Fatalf("DeletePin(%q): %v", kind, err)
		}
	}
	if list, err := s.Pins(c, "kinds", ""); err != nil || len(list) != 1 || list[0].Hash != "v2:sha256:bb" {
		t.Fatalf("Pins after the deletes: %+v, %v", list, err)
	}
}
