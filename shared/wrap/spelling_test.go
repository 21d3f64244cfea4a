package wrap

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/refusal"
)

// spellingPolicy denies write_file and shell_*, holds pay_* for approval.
const spellingPolicy = "deny: [write_file, shell_*]\napproval: [pay_*]\n"

// nameCall is a tools/call of the JSON string literal name (quotes and
// escapes included, exactly as sent).
func nameCall(id, name string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":` + name + `,"arguments":{}}}`
}

// spelling is one way to write a tool name, a method or a key, and what
// wrap must do with it.
type spelling struct {
	name string
	line string // one client line, without its newline
	word refusal.Word
	rule string // "" with word "": forwarded, byte for byte
}

// spellings are the bypass attempts of issue 16 item 3, and the ordinary
// names that must still go through untouched. Each refused line is one
// the child might read as a call of a denied tool: a C-string or shell
// reader that stops at or drops a NUL, a reader that trims, one that
// lower-cases or NFKC-normalises names, one that skips invisible
// characters.
var spellings = []spelling{
	// The tool name holds a character no two readers agree on: refused
	// before any glob is tried (rule ambiguous, tool "").
	{"NUL at the end", nameCall("1", `"write_file\u0000"`), refusal.PolicyDenied, ruleAmbiguous},
	{"NUL in the middle", nameCall("2", `"write\u0000_file"`), refusal.PolicyDenied, ruleAmbiguous},
	{"NUL before an allowed name", nameCall("3", `"write_file\u0000echo"`), refusal.PolicyDenied, ruleAmbiguous},
	{"BEL", nameCall("4", `"write_file\u0007"`), refusal.PolicyDenied, ruleAmbiguous},
	{"ESC", nameCall("5", `"\u001b[2Kwrite_file"`), refusal.PolicyDenied, ruleAmbiguous},
	{"TAB", nameCall("6", `"write_file\t"`), refusal.PolicyDenied, ruleAmbiguous},
	{"LF", nameCall("7", `"write_file\n"`), refusal.PolicyDenied, ruleAmbiguous},
	{"CR", nameCall("8", `"write_file\r"`), refusal.PolicyDenied, ruleAmbiguous},
	{"DEL escaped", nameCall("9", `"write_file\u007f"`), refusal.PolicyDenied, ruleAmbiguous},
	{"DEL raw", nameCall("10", "\"write_file\x7f\""), refusal.PolicyDenied, ruleAmbiguous},
	{"C1 NEL", nameCall("11", `"write_file\u0085"`), refusal.PolicyDenied, ruleAmbiguous},
	{"C1 CSI raw", nameCall("12", "\"write_file\u009b\""), refusal.PolicyDenied, ruleAmbiguous},
	{"zero-width space", nameCall("13", `"write_file\u200b"`), refusal.PolicyDenied, ruleAmbiguous},
	{"zero-width joiner raw", nameCall("14", "\"write\u200d_file\""), refusal.PolicyDenied, ruleAmbiguous},
	{"word joiner", nameCall("15", `"write_\u2060file"`), refusal.PolicyDenied, ruleAmbiguous},
	{"byte order mark", nameCall("16", `"\ufeffwrite_file"`), refusal.PolicyDenied, ruleAmbiguous},
	{"soft hyphen", nameCall("17", `"write_\u00adfile"`), refusal.PolicyDenied, ruleAmbiguous},
	{"bidi override", nameCall("18", `"\u202eelif_etirw"`), refusal.PolicyDenied, ruleAmbiguous},
	{"bidi isolate raw", nameCall("19", "\"write_file\u2066\""), refusal.PolicyDenied, ruleAmbiguous},
	{"left-to-right mark", nameCall("20", `"write_file\u200e"`), refusal.PolicyDenied, ruleAmbiguous},
	{"Unicode tag, escaped pair", nameCall("21", `"write_file\udb40\udc01"`), refusal.PolicyDenied, ruleAmbiguous},
	{"Unicode tags raw", nameCall("22", "\"write_file\U000E0077\U000E007F\""), refusal.PolicyDenied, ruleAmbiguous},
	{"variation selector", nameCall("23", `"write_file\ufe0f"`), refusal.PolicyDenied, ruleAmbiguous},
	{"combining grapheme joiner", nameCall("24", `"write_\u034ffile"`), refusal.PolicyDenied, ruleAmbiguous},
	{"Hangul filler", nameCall("25", `"write_file\u3164"`), refusal.PolicyDenied, ruleAmbiguous},
	{"lone surrogate (U+FFFD to Go, kept by Python)", nameCall("26", `"write_file\ud800"`), refusal.PolicyDenied, ruleAmbiguous},
	{"U+FFFD itself", nameCall("27", `"write_file\ufffd"`), refusal.PolicyDenied, ruleAmbiguous},
	{"trailing space", nameCall("28", `"write_file "`), refusal.PolicyDenied, ruleAmbiguous},
	{"leading space", nameCall("29", `" write_file"`), refusal.PolicyDenied, ruleAmbiguous},
	{"space inside (a shell splits it)", nameCall("30", `"write_file x"`), refusal.PolicyDenied, ruleAmbiguous},
	{"no-break space", nameCall("31", `"write_file\u00a0"`), refusal.PolicyDenied, ruleAmbiguous},
	{"ideographic space raw", nameCall("32", "\"write_file\u3000\""), refusal.PolicyDenied, ruleAmbiguous},
	{"line separator", nameCall("33", `"write_file\u2028"`), refusal.PolicyDenied, ruleAmbiguous},
	{"hidden character in an allowed name", nameCall("34", `"echo\u0000"`), refusal.PolicyDenied, ruleAmbiguous},

	// A spelling that folds to a denied or held name: matched after the
	// normalization (NFKC, then case), so the glob decides as for the
	// plain name.
	{"upper case", nameCall("40", `"WRITE_FILE"`), refusal.PolicyDenied, "deny:write_file"},
	{"mixed case", nameCall("41", `"Write_File"`), refusal.PolicyDenied, "deny:write_file"},
	{"fullwidth letters raw", nameCall("42", "\"ｗｒｉｔｅ＿ｆｉｌｅ\""), refusal.PolicyDenied, "deny:write_file"},
	{"fullwidth letters escaped", nameCall("43", `"\uff57rite_file"`), refusal.PolicyDenied, "deny:write_file"},
	{"ligature fi", nameCall("44", "\"write_\ufb01le\""), refusal.PolicyDenied, "deny:write_file"},
	{"dotless i", nameCall("45", "\"wr\u0131te_file\""), refusal.PolicyDenied, "deny:write_file"},
	{"dotted capital I", nameCall("46", "\"WR\u0130TE_FILE\""), refusal.PolicyDenied, "deny:write_file"},
	{"long s", nameCall("47", "\"\u017fhell_exec\""), refusal.PolicyDenied, "deny:shell_*"},
	{"mathematical bold", nameCall("48", "\"\U0001D42C\U0001D421ell_exec\""), refusal.PolicyDenied, "deny:shell_*"},
	{"circled letters", nameCall("49", "\"\u24e2hell_exec\""), refusal.PolicyDenied, "deny:shell_*"},
	{"upper-case approval", nameCall("50", `"PAY_invoice"`), refusal.PendingApproval, "approval:pay_*"},

	// The method, or a key, holds what the tool name may not: the line
	// may be a tools/call to some child, and wrap cannot read it as every
	// child does. Refused as ambiguous, whatever the method says.
	{"method with NUL", `{"jsonrpc":"2.0","id":60,"method":"tools/call\u0000","params":{"name":"write_file"}}`, refusal.PolicyDenied, ruleAmbiguous},
	{"method with NUL, allowed tool", `{"jsonrpc":"2.0","id":61,"method":"tools/call\u0000","params":{"name":"echo"}}`, refusal.PolicyDenied, ruleAmbiguous},
	{"method with zero-width space", `{"jsonrpc":"2.0","id":62,"method":"tools/\u200bcall","params":{"name":"write_file"}}`, refusal.PolicyDenied, ruleAmbiguous},
	{"method with raw DEL", "{\"jsonrpc\":\"2.0\",\"id\":63,\"method\":\"tools/call\x7f\",\"params\":{\"name\":\"write_file\"}}", refusal.PolicyDenied, ruleAmbiguous},
	{"method with trailing space", `{"jsonrpc":"2.0","id":64,"method":"tools/call ","params":{"name":"write_file"}}`, refusal.PolicyDenied, ruleAmbiguous},
	{"method in fullwidth letters", "{\"jsonrpc\":\"2.0\",\"id\":65,\"method\":\"ｔｏｏｌｓ／ｃａｌｌ\",\"params\":{\"name\":\"write_file\"}}", refusal.PolicyDenied, ruleAmbiguous},
	{"method with long s", "{\"jsonrpc\":\"2.0\",\"id\":66,\"method\":\"tool\u017f/call\",\"params\":{\"name\":\"write_file\"}}", refusal.PolicyDenied, ruleAmbiguous},
	{"other method with NUL", `{"jsonrpc":"2.0","id":67,"method":"ping\u0000"}`, refusal.PolicyDenied, ruleAmbiguous},
	{"other method with a bidi control", `{"jsonrpc":"2.0","id":68,"method":"\u202eping"}`, refusal.PolicyDenied, ruleAmbiguous},
	{"method key with NUL", `{"jsonrpc":"2.0","id":69,"method\u0000":"tools/call","params":{"name":"write_file"}}`, refusal.PolicyDenied, ruleAmbiguous},
	{"second method key with NUL", `{"jsonrpc":"2.0","id":70,"method":"ping","method\u0000":"tools/call","params":{"name":"write_file"}}`, refusal.PolicyDenied, ruleAmbiguous},
	{"name key with NUL after an allowed name", `{"jsonrpc":"2.0","id":71,"method":"tools/call","params":{"name":"echo","name\u0000":"write_file"}}`, refusal.PolicyDenied, ruleAmbiguous},
	{"name key with zero-width space", `{"jsonrpc":"2.0","id":72,"method":"tools/call","params":{"name":"echo","\u200bname":"write_file"}}`, refusal.PolicyDenied, ruleAmbiguous},
	{"params key with NUL", `{"jsonrpc":"2.0","id":73,"method":"tools/call","params":{"name":"echo"},"params\u0000":{"name":"write_file"}}`, refusal.PolicyDenied, ruleAmbiguous},

	// What must still go through, byte for byte.
	{"plain allowed name", nameCall("80", `"echo"`), "", ""},
	{"allowed name with dots and dashes", nameCall("81", `"fs.read-file_v2"`), "", ""},
	{"non-ASCII letters in an allowed name", nameCall("82", `"café_menu"`), "", ""},
	{"non-ASCII arguments", `{"jsonrpc":"2.0","id":83,"method":"tools/call","params":{"name":"echo","arguments":{"text":"héllo ｗｏｒｌｄ \u200b"}}}`, "", ""},
	{"a name that only looks like a denied one", nameCall("84", "\"writ\u0435_file\""), "", ""}, // Cyrillic е: another name to every reader
	{"other method with non-ASCII params", `{"jsonrpc":"2.0","id":85,"method":"resources/read","params":{"uri":"file:///tmp/é"}}`, "", ""},
	{"other method with escaped control in params", `{"jsonrpc":"2.0","id":86,"method":"resources/read","params":{"uri":"a\u0000b"}}`, "", ""},
	{"a key with a control character elsewhere", `{"jsonrpc":"2.0","id":87,"method":"ping","params":{"x\u0000":1}}`, "", ""},
}

// decideOne runs line through a gate under policy src, in memory, and
// returns what the child received, what the client received and the
// records the gate queued.
func decideOne(t *testing.T, src, line string) (child, client string, recs []Record) {
	t.Helper()
	p, err := ParsePolicy([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var cb, ob bytes.Buffer
	g := &gate{policy: p, enforce: true, child: &cb, out: &clientOut{w: &ob}}
	if err := g.run(strings.NewReader(line + "\n")); err != nil {
		t.Fatal(err)
	}
	return cb.String(), ob.String(), g.recs
}

// TestNameSpellings is issue 16 item 3 as a table: every spelling of a
// denied tool, a tools/call method or a key that a child might read as
// the plain one is refused with wrap's one frame, and the ordinary names
// are relayed untouched.
func TestNameSpellings(t *testing.T) {
	for _, tc := range spellings {
		t.Run(tc.name, func(t *testing.T) {
			child, client, recs := decideOne(t, spellingPolicy, tc.line)
			if tc.word == "" {
				if child != tc.line+"\n" || client != "" {
					t.Fatalf("want the line relayed verbatim; the child got %q, the client %q", child, client)
				}
				for _, r := range recs {
					if r.Outcome != audit.OutcomeAllowed {
						t.Errorf("record %+v", r)
					}
				}
				return
			}
			if child != "" {
				t.Errorf("the child received %q", child)
			}
			id := strings.TrimPrefix(tc.line, `{"jsonrpc":"2.0","id":`)
			id = id[:strings.IndexByte(id, ',')]
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			if err := isFrame(client, id, string(tc.word), recs[0].Tool, tc.rule); err != nil {
				t.Errorf("client got %q: %v", client, err)
			}
			r := recs[0]
			if r.Outcome != audit.OutcomeRefused || r.Word != string(tc.word) || r.Rule != tc.rule {
				t.Errorf("record outcome %s word %s rule %q; want refused %s %q", r.Outcome, r.Word, r.Rule, tc.word, tc.rule)
			}
			if tc.rule == ruleAmbiguous && r.Tool != "" {
				t.Errorf("record tool %q: an ambiguous name is not recorded", r.Tool)
			}
		})
	}
}

// TestAllowListMatchesTheNameAsSent: normalization widens deny and
// approval, never allow. A name that matches an allow glob only after
// folding is not allowed: the child may well know it as another tool.
func TestAllowListMatchesTheNameAsSent(t *testing.T) {
	const src = "allow: [echo, read_*]\n"
	for _, tc := range []struct{ name, want string }{
		{`"echo"`, ""},
		{`"read_file"`, ""},
		{`"ECHO"`, ruleNoAllow},
		{`"Read_file"`, ruleNoAllow},
		{"\"ｅｃｈｏ\"", ruleNoAllow},
		{`"echo\u0000"`, ruleAmbiguous},
		{`"read_file "`, ruleAmbiguous},
	} {
		line := nameCall("1", tc.name)
		child, client, recs := decideOne(t, src, line)
		switch {
		case tc.want == "" && (child != line+"\n" || client != ""):
			t.Errorf("%s: want it relayed; child %q client %q", tc.name, child, client)
		case tc.want != "" && (child != "" || isFrame(client, "1", "POLICY_DENIED", "", tc.want) != nil && isFrame(client, "1", "POLICY_DENIED", strings.Trim(tc.name, `"`), tc.want) != nil || len(recs) != 1 || recs[0].Rule != tc.want):
			t.Errorf("%s: want refused with rule %q; child %q client %q records %+v", tc.name, tc.want, child, client, recs)
		}
	}
}

// TestSpellingsNeverReachTheChild: the same table end to end, through the
// wrap CLI on real pipes with a real child process and the audit file:
// the child receives exactly the lines the table forwards, the client
// one frame for each refused line, and the audit file a refused record
// for each.
func TestSpellingsNeverReachTheChild(t *testing.T) {
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	auditPath := filepath.Join(dir, "audit.jsonl")
	pol := writeFile(t, "policy.yaml", spellingPolicy)
	var in, fwd bytes.Buffer
	frames, refused := map[string]int{}, 0
	for _, tc := range spellings {
		in.WriteString(tc.line + "\n")
		if tc.word == "" {
			fwd.WriteString(tc.line + "\n")
			continue
		}
		// The frame the in-memory gate writes for the line: the CLI
		// must write the same bytes.
		_, f, _ := decideOne(t, spellingPolicy, tc.line)
		frames[f]++
		refused++
	}
	out, stderr, code := runAll(t, append([]string{"--policy", pol, "--audit", auditPath, "--"}, childArgv(t, "mirror", seen)...), in.Bytes())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fwd.Bytes()) {
		t.Errorf("the child received:\n%s\nwant exactly:\n%s", got, fwd.Bytes())
	}
	rest := string(out)
	for f, n := range frames {
		if c := strings.Count(rest, f); c != n {
			t.Errorf("client got %d of %s, want %d", c, f, n)
		}
		rest = strings.ReplaceAll(rest, f, "")
	}
	if rest != fwd.String() {
		t.Errorf("client got, besides the frames:\n%s\nwant what the child echoed:\n%s", rest, fwd.String())
	}
	n := 0
	for _, r := range readRecords(t, auditPath) {
		if r.Outcome == audit.OutcomeRefused {
			n++
		}
	}
	if n != refused {
		t.Errorf("%d refused records, want %d", n, refused)
	}
}

// TestHiddenRunes pins the class of characters a tool name may not hold
// to its definition in docs/wrap.md: C0, DEL, C1, format characters
// (zero-width, bidi controls, tags), the other default-ignorable code
// points, U+FFFD and every whitespace character.
func TestHiddenRunes(t *testing.T) {
	for r := rune(0); r <= unicode.MaxRune; r++ {
		want := r < 0x20 || (0x7f <= r && r <= 0x9f) ||
			unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
			unicode.Is(unicode.Variation_Selector, r) || unicode.IsSpace(r) || unicode.Is(unicode.Zs, r) ||
			(0xe0000 <= r && r <= 0xe0fff) || r == 0xfffd
		if got := hiddenInName(r); got != want {
			t.Fatalf("hiddenInName(%U) = %v, want %v", r, got, want)
		}
	}
}

// TestFoldedGlob: a glob's letters fold as a name's do, sets included.
func TestFoldedGlob(t *testing.T) {
	cases := []struct {
		glob, name string
		want       bool
	}{
		{"write_file", "WRITE_FILE", true},
		{"Write_File", "write_file", true},
		{"shell_*", "ＳＨＥＬＬ_x", true},
		{"[a-z]x", "Qx", true},
		{"[A-Z]x", "qx", true},
		{"[!a-z]x", "Qx", false},
		{"[s]", "\u017f", true},
		{"v[0-9]", "v\uff17", true}, // fullwidth 7
		{"echo", "ech0", false},
		{"echo", "writ\u0435", false},
	}
	for _, tc := range cases {
		g, err := compileGlob(tc.glob)
		if err != nil {
			t.Fatalf("%q: %v", tc.glob, err)
		}
		if got := g.matchFolded(foldName(tc.name)); got != tc.want {
			t.Errorf("%q matches folded %q: got %v, want %v", tc.glob, tc.name, got, tc.want)
		}
	}
}

// TestGlobsThatCouldNeverMatchAreLoadErrors: a glob holding a hidden
// character could only ever match a name that is refused before globs
// are tried, and one not in NFKC form would not be spelled as the folded
// names it is matched against. Both are errors when wrap starts.
func TestGlobsThatCouldNeverMatchAreLoadErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"deny: [\"write_file\\0\"]\n", `holds a control, invisible or whitespace character`},
		{"deny: [\"write_file \"]\n", `holds a control, invisible or whitespace character`},
		{"allow: [\"echo\\u200b\"]\n", `holds a control, invisible or whitespace character`},
		{"deny: [\"ｗｒｉｔｅ_file\"]\n", `is not in Unicode NFKC form; write "write_file"`},
		{"deny: [\"cafe\u0301\"]\n", `is not in Unicode NFKC form; write "café"`},
	} {
		if _, err := ParsePolicy([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.yaml, err, tc.want)
		}
	}
	if _, err := ParsePolicy([]byte("deny: [café, Write_File]\n")); err != nil {
		t.Errorf("an NFKC glob with upper case: %v", err)
	}
}

// TestMayBeCallIsSoundForEverySpelling: the fast filter lets through to
// the parser every line of the table that is a possible call; a filter
// that dropped one would forward it undecided.
func TestMayBeCallIsSoundForEverySpelling(t *testing.T) {
	for _, tc := range spellings {
		if tc.word != "" && !needsDecision([]byte(tc.line+"\n")) {
			t.Errorf("%s: the fast filter forwards %q undecided", tc.name, tc.line)
		}
	}
	for _, b := range []string{"abcdefg\x7f", "abcdefgh\x7f", "\x7f", "abcdefghijklmno\xc3\xa9", "\xff"} {
		if !notPrintableASCII([]byte(b)) {
			t.Errorf("notPrintableASCII(%q) = false", b)
		}
	}
	for _, b := range []string{"", "abcdefgh", `{"jsonrpc":"2.0","id":1,"method":"ping"} ~~~~~~~`} {
		if notPrintableASCII([]byte(b)) {
			t.Errorf("notPrintableASCII(%q) = true", b)
		}
	}
}
