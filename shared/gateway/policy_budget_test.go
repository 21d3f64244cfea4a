package gateway_test

// max_tool_calls holds for calls in flight together: the policy stage
// reserves each tools/call against it before the send, and a call refused
// after the reservation gives its unit back.

import (
	"sync"
	"testing"

	"github.com/aegis-gw/aegis/shared/registry"
)

func TestPolicyToolCallsBoundUnderConcurrency(t *testing.T) {
	const limit, good, bad = 5, 12, 6
	for _, st := range polStores {
		t.Run(st.name, func(t *testing.T) {
			e := newPolEnv(t, st.new(t), registry.Tenant{}, "manifest: {max_tool_calls: 5}\n")
			// The session, opened by a call that is refused later
			// (content: -32602): it spends nothing.
			r, sid := e.invoke(t, e.Key, "", "echo", `{"message":5}`, "")
			if r.code() != -32602 || sid == "" {
				t.Fatalf("opening call = %s (session %q); want -32602 in a new session", r.Raw, sid)
			}
			var mu sync.Mutex
			allowed, refused := 0, 0
			var wg sync.WaitGroup
			for i := range good + bad {
				wg.Go(func() {
					args := `{"message":"hi"}`
					if i >= good {
						args = `{"message":5}` // refused by the content stage, after the reservation
					}
					r, _ := e.invoke(t, e.Key, sid, "echo", args, "")
					mu.Lock()
					defer mu.Unlock()
					switch {
					case i >= good:
						if r.code() != -32602 && !(r.code() == -32005 && r.reason() == "tool_calls") {
							t.Errorf("bad call = %s; want -32602 or -32005 tool_calls", r.Raw)
						}
					case r.Error == nil:
						allowed++
					case r.code() == -32005 && r.reason() == "tool_calls":
						refused++
					default:
						t.Errorf("call = %s; want a result or -32005 tool_calls", r.Raw)
					}
				})
			}
			wg.Wait()
			if allowed > limit || allowed+refused != good {
				t.Fatalf("%d concurrent calls under max_tool_calls %d: %d ran, %d refused", good, limit, allowed, refused)
			}
			// Whatever the refused calls reserved was given back: exactly
			// the rest of the budget runs now, and then nothing.
			for i := allowed; i < limit; i++ {
				if r, _ := e.invoke(t, e.Key, sid, "echo", `{"message":"hi"}`, ""); r.Error != nil {
					t.Fatalf("call %d of %d after the burst = %s", i+1, limit, r.Raw)
				}
			}
			if r, _ := e.invoke(t, e.Key, sid, "echo", `{"message":"hi"}`, ""); r.code() != -32005 || r.reason() != "tool_calls" {
				t.Fatalf("call past the budget = %s; want -32005 tool_calls", r.Raw)
			}
		})
	}
}

// TestPolicyToolCallsUncountable: when the session counters cannot be
// written (neither counted with the session's windows nor reserved)
// the call is refused (-32603, the policy stage fails closed) and sent
// nowhere; once the store is back the budget is whole.
func TestPolicyToolCallsUncountable(t *testing.T) {
	for _, st := range polStores {
		t.Run(st.name, func(t *testing.T) {
			e := newPolEnv(t, st.new(t), registry.Tenant{}, "manifest: {max_tool_calls: 1}\n")
			r, sid := e.invoke(t, e.Key, "", "echo", `{"message":5}`, "") // opens the session, spends nothing
			if r.code() != -32602 {
				t.Fatalf("opening call = %s", r.Raw)
			}
			e.B.ReserveDown.Store(true)
			if r, _ := e.invoke(t, e.Key, sid, "echo", `{"message":"hi"}`, ""); r.code() != -32603 {
				t.Fatalf("echo, counters unreachable = %s; want -32603", r.Raw)
			}
			e.B.ReserveDown.Store(false)
			if r, _ := e.invoke(t, e.Key, sid, "echo", `{"message":"hi"}`, ""); r.Error != nil {
				t.Fatalf("echo, store back = %s", r.Raw)
			}
			if r, _ := e.invoke(t, e.Key, sid, "echo", `{"message":"hi"}`, ""); r.code() != -32005 || r.reason() != "tool_calls" {
				t.Fatalf("echo past the budget = %s; want -32005 tool_calls", r.Raw)
			}
		})
	}
}
