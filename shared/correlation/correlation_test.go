package correlation

import "testing"

func TestTraceID(t *testing.T) {
	for _, tc := range []struct {
		tp   string
		want string
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", ""},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", ""},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", ""},
		{"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", ""},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", ""},
		{"", ""},
	} {
		got, ok := TraceID(tc.tp)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("TraceID(%q) = %q, %v; want %q", tc.tp, got, ok, tc.want)
		}
	}
	if a, b := ID(""), ID(""); len(a) != 32 || a == b {
		t.Fatalf("fresh ids %q %q", a, b)
	}
}
