package audit

// Finding is one kind of sensitive content a check found in a call and
// what it did about it: where ("arguments", "result", or "tool" for the
// called tool's definition), the kind
// ("card", "ssn", "credential", "email", ...), the detector's rule id and
// the action ("blocked", "redacted" or "logged"). It never holds the
// value that was found.
type Finding struct {
	At     string `json:"at"`
	Kind   string `json:"kind"`
	Rule   string `json:"rule"`
	Action string `json:"action"`
}

// Where a finding was made.
const (
	AtArguments = "arguments"
	AtResult    = "result"
	AtTool      = "tool" // the called tool's definition (poisoning)
	// Server-to-client messages other than the answer (ingress,
	// shared/content.Results.Ingress).
	AtNotification = "notification" // a server's notification
	AtRequest      = "request"      // a server's request to the client (sampling, elicitation, roots)
)

// What a check did with a finding.
const (
	ActionBlocked  = "blocked"  // the call was refused (-32052, -32053)
	ActionRedacted = "redacted" // masked in place before the answer left
	ActionLogged   = "logged"   // recorded and let through (monitor)
)

// MaxFindings bounds the findings one record keeps: repeats of one
// (at, kind, rule, action) are kept once, and past the bound the rest are
// summed up in FindingsCut.
const MaxFindings = 16

// AddFinding adds f to fs unless an equal finding is there already or fs
// is full; it reports whether fs was full (f is then counted as cut).
func AddFinding(fs []Finding, f Finding) ([]Finding, bool) {
	for _, g := range fs {
		if g == f {
			return fs, false
		}
	}
	if len(fs) >= MaxFindings {
		return fs, true
	}
	return append(fs, f), false
}
