package storetest

import (
	"reflect"
	"testing"

	"github.com/aegis-gw/aegis/shared/killswitch"
)

func testKillSwitch(t *testing.T, nb NewBackend) {
	b := nb(t, Options{})
	k, c := b, ctx(t)

	if got, err := k.Stops(c, "acme"); err != nil || len(got) != 0 {
		t.Fatalf("Stops(empty) = %+v, %v", got, err)
	}
	server := killswitch.Stop{Tenant: "acme", Server: "payments", Reason: "incident 42", By: "ops@acme", At: t0}
	tool := killswitch.Stop{Tenant: "acme", Server: "docs", Tool: "delete#all", By: "ops@acme", At: t0}
	other := killswitch.Stop{Tenant: "beta", Server: "docs", Tool: "delete#all", At: t0}
	for _, s := range []killswitch.Stop{server, tool, other} {
		if err := k.PutStop(c, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := k.Stops(c, "acme")
	if err != nil || !reflect.DeepEqual(got, []killswitch.Stop{tool, server}) {
		t.Fatalf("Stops(acme) = %+v, %v; want docs/delete#all, payments", got, err)
	}
	// Same tenant, server and tool: replaced, not added.
	server.Reason = "incident 43"
	if err := k.PutStop(c, server); err != nil {
		t.Fatal(err)
	}
	if err := k.DeleteStop(c, "acme", "docs", "delete#all"); err != nil {
		t.Fatal(err)
	}
	if err := k.DeleteStop(c, "acme", "docs", "never-stopped"); err != nil {
		t.Fatalf("DeleteStop(absent) = %v, want nil", err)
	}
	got, err = k.Stops(c, "acme")
	if err != nil || !reflect.DeepEqual(got, []killswitch.Stop{server}) {
		t.Fatalf("Stops(acme) after resume = %+v, %v; want payments (incident 43)", got, err)
	}
	if got, err := k.Stops(c, "beta"); err != nil || !reflect.DeepEqual(got, []killswitch.Stop{other}) {
		t.Fatalf("Stops(beta) = %+v, %v", got, err)
	}
}
