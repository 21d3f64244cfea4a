// Package scan is aegis's one content scanner: a single pass over the
// decoded strings of a JSON message (object keys and values, nested
// objects and arrays, and the JSON texts that strings carry, to a bounded
// depth) that finds credentials, payment card numbers, US social security
// numbers, IBANs, email addresses, phone numbers and dates of birth, each
// with its kind, a stable rule id, the JSON pointer of the string and the
// byte span inside the decoded string.
//
// Detection is hand-written: each byte is looked up in a trigger table and
// only the few bytes that can start a finding (a digit at a word start, a
// known credential prefix, '@', '+', '=', ':', "-----BEGIN ") run a
// detector, which reads a bounded window (or, for a PEM block, the block).
// The work is linear in the document, and Scan allocates nothing when it
// finds nothing and is given a dst with room.
//
// With Options.Kinds asking for them, the same pass also finds the threat
// kinds (Kind.Threat; inject.go): prompt injection, hidden text,
// exfiltration directives and tool shadowing, with a base64 or hex blob
// that decodes to text decoded once and checked; a caller that does not
// ask pays nothing for them.
//
// What a finding means is up to the caller: Kind.Sensitive tells the kinds
// that block a message (credentials, cards, SSNs); the others are personal
// data that callers mask or log. Redact replaces findings by markers.
// See docs/design/scan.md for the rules, the measured precision and recall,
// and what is out of reach; docs/design/threats.md for the threat kinds.
package scan

import (
	"sync"
	"unsafe"
)

// Kind is what a finding is.
type Kind uint8

// The kinds, in the order Options.Kinds and Kind.String know them.
const (
	KindCredential Kind = iota // an API key, token, private key or random secret value
	KindCard                   // a payment card number (issuer range, length, Luhn)
	KindSSN                    // a US social security number
	KindIBAN                   // an international bank account number (mod-97)
	KindEmail                  // an email address
	KindPhone                  // a phone number
	KindDOB                    // a date next to a word that makes it a date of birth

	// The threat kinds (inject.go), found only when Options.Kinds asks.
	KindInjection    // an instruction override, a role injection, a fake turn, a chat-template token
	KindHidden       // text hidden from a human reader: tag characters, invisible controls, HTML comments and hidden elements
	KindExfiltration // a directive to send data out, or to keep something from the user
	KindShadowing    // a directive that changes how other tools are used
	numKinds
)

// numPII is the number of personal-data and credential kinds, the first
// kinds; the threat kinds follow them.
const numPII = KindInjection

var kindNames = [numKinds]string{"credential", "card", "ssn", "iban", "email", "phone", "dob", "injection", "hidden", "exfiltration", "shadowing"}

// String is the kind's name: "credential", "card", "ssn", "iban", "email",
// "phone", "dob", "injection", "hidden", "exfiltration" or "shadowing"
// ("unknown" for any other value).
func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Sensitive reports whether findings of kind k block a message (refusal
// codes -32052 and -32053): true for credentials, cards and SSNs.
func (k Kind) Sensitive() bool {
	return k == KindCredential || k == KindCard || k == KindSSN
}

// Threat reports whether k is one of the threat kinds (prompt injection,
// hidden text, exfiltration, tool shadowing): refusal codes -32050 and
// -32051. The other kinds are credentials and personal data.
func (k Kind) Threat() bool { return k >= numPII && k < numKinds }

// PIIKinds returns the credential and personal-data kinds: what a Scanner
// finds when Options.Kinds is empty.
func PIIKinds() []Kind {
	out := make([]Kind, 0, numPII)
	for k := range numPII {
		out = append(out, k)
	}
	return out
}

// ThreatKinds returns the threat kinds (Kind.Threat).
func ThreatKinds() []Kind {
	out := make([]Kind, 0, numKinds-numPII)
	for k := numPII; k < numKinds; k++ {
		out = append(out, k)
	}
	return out
}

// AllKinds returns every kind, PIIKinds then ThreatKinds.
func AllKinds() []Kind { return append(PIIKinds(), ThreatKinds()...) }

// Finding is one match.
type Finding struct {
	Kind Kind
	// Rule is the stable id of the rule that matched ("github-pat",
	// "aws-access-key-id", "card-luhn", "ssn", "iban", "email",
	// "phone-e164", "dob", ...). Rules lists them all.
	Rule string
	// Path is the RFC 6901 pointer, in the scanned document, of the
	// string that holds the finding; for a key, the pointer of its
	// member. ScanString reports "".
	Path string
	// Nested holds, when the string at Path carries a JSON text and the
	// finding is inside it, the pointer of the string inside that text,
	// one pointer per level of nesting, outermost first. Start and End
	// are then offsets in the innermost decoded string.
	Nested []string
	// Key reports that the finding is in an object key.
	Key bool
	// Number reports that the finding is a JSON number (a card number
	// sent as one); the span is inside its literal text.
	Number bool
	// Start and End are the byte span of the finding inside the decoded
	// string (or the number's text).
	Start, End int
}

// Options configure a Scanner. The zero value (or nil) turns every
// credential and personal-data kind on (PIIKinds), with the default depth;
// the threat kinds are opt-in.
type Options struct {
	// Kinds are the kinds to find; nil or empty means PIIKinds. A
	// Scanner given PII and threat kinds finds both in one pass.
	Kinds []Kind
	// MaxDepth is the number of JSON levels scanned: 1 is the document
	// only, 2 also the JSON texts its strings carry (a string that starts
	// with '{' or '[' after spaces and parses as one JSON value), and so
	// on. 0 means DefaultMaxDepth; values above MaxMaxDepth are capped.
	MaxDepth int
	// PhoneRegions are the regions (CLDR codes, "US", "FR") whose
	// national phone formats (without '+') are taken, in the order they
	// are tried; nil or empty means DefaultPhoneRegions, unknown codes are
	// left out; a region of the North American plan brings the plan's
	// other regions. Numbers written with '+' are taken for every country.
	PhoneRegions []string
}

// Depth bounds of Options.MaxDepth.
const (
	DefaultMaxDepth = 3
	MaxMaxDepth     = 8
)

// Scanner finds sensitive content. It is immutable after New and safe for
// concurrent use.
type Scanner struct {
	on     [numKinds]bool
	threat bool        // some threat kind is on
	class  byteClasses // byte classes for the kinds on (classes)
	// digitRuns has bit n set when a run of n digits may start a finding
	// of a kind that is on (digitsMay); phoneRuns, when it may with a
	// separator after it (a phone number's first group).
	digitRuns, phoneRuns uint32
	maxDepth             int
	// phoneRegions: Options.PhoneRegions' metadata, when phones are on,
	// read at the first phone candidate rather than in New: compiling
	// the library's patterns takes tens of milliseconds, which a Lambda
	// cold start would otherwise pay before its first request.
	phoneRegions func() []*phoneRegion
	pool         sync.Pool // *state
	bufs         sync.Pool // *[]byte: decoded payloads (inject.go)
}

// New returns a Scanner for o (nil: PIIKinds, DefaultMaxDepth). o is
// copied.
func New(o *Options) *Scanner {
	s := &Scanner{maxDepth: DefaultMaxDepth}
	if o != nil {
		for _, k := range o.Kinds {
			if k < numKinds {
				s.on[k] = true
			}
		}
		if o.MaxDepth > 0 {
			s.maxDepth = min(o.MaxDepth, MaxMaxDepth)
		}
	}
	if o == nil || len(o.Kinds) == 0 {
		for k := range numPII {
			s.on[k] = true
		}
	}
	for k := numPII; k < numKinds; k++ {
		s.threat = s.threat || s.on[k]
	}
	s.class = classes(&s.on, s.threat)
	s.digitRuns, s.phoneRuns = runLengths(&s.on)
	if s.on[KindPhone] {
		regions := DefaultPhoneRegions
		if o != nil && len(o.PhoneRegions) > 0 {
			regions = o.PhoneRegions
		}
		ids := append([]string(nil), regions...) // the caller's slice may change after New
		s.phoneRegions = sync.OnceValue(func() []*phoneRegion { return phoneRegions(ids) })
	}
	s.pool.New = func() any { return newState(s) }
	return s
}

// Scan appends to dst the findings in doc, one JSON value, in document
// order, and returns the extended slice. For a doc that is not one JSON
// value it returns a *SyntaxError with the findings before the error.
// With a dst that has room, Scan allocates nothing unless it finds
// something.
func (s *Scanner) Scan(doc []byte, dst []Finding) ([]Finding, error) {
	st := s.pool.Get().(*state)
	st.dst, st.lib = dst, phoneLibBudget
	err := st.walk(0, doc)
	st.levels[0].w.reset(nil, nil)
	dst = st.dst
	st.dst = nil
	s.pool.Put(st)
	return dst, err
}

// ScanString appends to dst the findings in str, taken as the decoded
// content of one JSON string (so a JSON text in it is scanned as one), and
// returns the extended slice. Findings have Path "".
func (s *Scanner) ScanString(str string, dst []Finding) []Finding {
	st := s.pool.Get().(*state)
	st.dst, st.lib = dst, phoneLibBudget
	b := unsafe.Slice(unsafe.StringData(str), len(str)) // read only
	l := &st.levels[0]
	l.w.reset(b, l) // no path
	l.scan(b, false, nil, false, false)
	l.w.reset(nil, nil)
	dst = st.dst
	st.dst = nil
	s.pool.Put(st)
	return dst
}

// state is the reusable working memory of one scan.
type state struct {
	s      *Scanner
	dst    []Finding
	lib    int // library checks of phone candidates left (phoneLibBudget)
	levels [MaxMaxDepth]level
}

// level walks the JSON text at one depth.
type level struct {
	st *state
	d  int
	w  walker
}

func newState(s *Scanner) *state {
	st := &state{s: s}
	for d := range st.levels {
		l := &st.levels[d]
		*l = level{st: st, d: d}
		l.w.lazy = l
		l.w.minNumber = minNumberLen
	}
	return st
}

func (st *state) walk(d int, doc []byte) error {
	l := &st.levels[d]
	l.w.reset(doc, l)
	return l.w.run()
}

// Visit scans one string (or number) at level l.d: the Visitor of
// ScanString's one string. The walks of Scan hand their strings to scan
// directly (walker.lazy).
func (l *level) Visit(str *String) error {
	l.scan(str.Decoded, false, str.Member, str.Key, str.Number)
	return nil
}

// scan scans one string (or a number's literal) at level l.d: raw is its
// content as written, with escapes when esc; member is the raw key of
// the member it belongs to.
func (l *level) scan(raw []byte, esc bool, member []byte, key, number bool) {
	dec := raw
	if esc {
		l.w.buf = AppendUnescaped(l.w.buf[:0], raw)
		dec = l.w.buf
	}
	st := l.st
	s := st.s
	mark := len(st.dst)
	switch {
	case number:
		st.dst = s.number(dec, member, st.dst)
	case !key && l.d+1 < s.maxDepth && holdsJSON(dec):
		if st.walk(l.d+1, dec) == nil {
			// The inner findings got their paths at the inner level.
			l.nest(mark)
			return
		}
		st.dst = st.dst[:mark]
		fallthrough
	default:
		t := unsafe.String(unsafe.SliceData(dec), len(dec)) // read only, during this call
		// Most strings hold nothing that starts a finding: skip tells,
		// and text is not called.
		if i := s.skip(t, 0); i < len(t) || s.memberMay(t, member) {
			st.dst = s.textFrom(t, i, member, st.dst, &st.lib)
		}
	}
	if len(st.dst) > mark {
		path := string(l.w.pathNow())
		for i := mark; i < len(st.dst); i++ {
			f := &st.dst[i]
			f.Path, f.Key, f.Number = path, key, number
		}
	}
}

// nest moves the findings from mark on, found in the JSON text held by
// the string being scanned, one level out: their Path goes to the front
// of Nested.
func (l *level) nest(mark int) {
	path := string(l.w.pathNow())
	for i := mark; i < len(l.st.dst); i++ {
		f := &l.st.dst[i]
		f.Nested = append([]string{f.Path}, f.Nested...)
		f.Path = path
	}
}

// holdsJSON reports whether b starts, after spaces, with '{' or '['.
func holdsJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '{', '[':
			return true
		}
		return false
	}
	return false
}
