package killswitch_test

import (
	"slices"
	"testing"

	"github.com/aegis-gw/aegis/shared/killswitch"
)

func TestNear(t *testing.T) {
	names := []string{"a.echo", "b.echo", "transfer", "add", "get-sum", "a.transfer"}
	for _, c := range []struct {
		name string
		in   string
		want []string
	}{
		{"letter case", "Echo", []string{"a.echo", "b.echo"}},
		{"tool inside exposed names", "echo", []string{"a.echo", "b.echo"}},
		{"one typo", "tranfsr", []string{"transfer"}},
		{"two letters swapped, closest first", "a.ecoh", []string{"a.echo", "b.echo"}},
		{"case and typo", "TRANSFR", []string{"transfer"}},
		{"exact is not near", "transfer", []string{"a.transfer"}},
		{"nothing close", "delete-everything", []string{}},
		{"short name, one edit", "ad", []string{"add"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := killswitch.Near(c.in, names); !slices.Equal(got, c.want) {
				t.Fatalf("Near(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
