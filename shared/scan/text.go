package scan

import (
	"math"
	"math/bits"
	"strings"
	"unsafe"
)

// Triggers: what a byte may start. Most bytes start nothing and cost one
// table look-up.
const (
	trDigit  = 1 << iota // cards, SSNs, phones, dates
	trCred               // the first byte of a credential prefix
	trUpper              // an IBAN's country code
	trAt                 // an email's '@'
	trPlus               // a phone number in international format
	trParen              // "(415) 555-0134", "(08) 8747 6301"
	trAssign             // '=' or ':' after a secret's name
	trDash               // "-----BEGIN "
	trThreat             // '<', '[', '!', '~' and the lead bytes of invisible characters (inject.go)
)

// wordASCII marks the bytes of an ASCII word: letters, digits, '_'.
var wordASCII = func() (t [256]bool) {
	for c := range 256 {
		t[c] = isAlnum(byte(c)) || c == '_'
	}
	return t
}()

var trigger = func() (t [256]uint16) {
	for c := '0'; c <= '9'; c++ {
		t[c] |= trDigit
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] |= trUpper
	}
	for _, r := range credRules {
		t[r.prefix[0]] |= trCred
	}
	t['@'] |= trAt
	t['+'] |= trPlus
	t['('] |= trParen
	t['='] |= trAssign
	t[':'] |= trAssign
	t['-'] |= trDash
	for _, c := range []byte{'<', '[', '!', '~', 0xe2, 0xef, 0xf3} {
		t[c] |= trThreat
	}
	return t
}()

// Byte classes of a Scanner (Scanner.class): what a byte may start with
// the kinds that are on.
const (
	clWord   = 1 << iota // an ASCII word byte (wordASCII)
	clDigit              // a digit, with a kind that starts with one on (card, SSN, date of birth, phone)
	clCred               // the first byte of a credential prefix, credentials on
	clIBAN               // an upper-case letter, IBANs on
	clAt                 // '@', emails on
	clPhone              // '+' or '(', phones on
	clAssign             // '=' or ':', credentials on
	clThreat             // trThreat, a threat kind on
)

// byteClasses are the classes of the 256 byte values.
type byteClasses [256]uint8

// classes returns the byte classes for the kinds on.
func classes(on *[numKinds]bool, threat bool) (cl byteClasses) {
	numeric := on[KindCard] || on[KindSSN] || on[KindDOB] || on[KindPhone]
	for c := range 256 {
		tr := trigger[c]
		if wordASCII[c] {
			cl[c] |= clWord
		}
		set := func(class uint8, ok bool) {
			if ok {
				cl[c] |= class
			}
		}
		set(clDigit, tr&trDigit != 0 && numeric)
		set(clCred, tr&(trCred|trDash) != 0 && on[KindCredential])
		set(clIBAN, tr&trUpper != 0 && on[KindIBAN])
		set(clAt, tr&trAt != 0 && on[KindEmail])
		set(clPhone, tr&(trPlus|trParen) != 0 && on[KindPhone])
		set(clAssign, tr&trAssign != 0 && on[KindCredential])
		set(clThreat, tr&trThreat != 0 && threat)
	}
	return cl
}

// skip returns the first position from i on where a detector may match
// (len(t) if none): the start of a word or a byte outside words whose
// class (Scanner.class) starts a kind that is on, where the detector's
// first condition holds, or, with the threat kinds on, a word where
// wordHit may match. Each first condition is one the detector
// checks itself, so what skip passes over holds no finding. skip calls
// nothing, so that its loop stays in registers: most of a text is passed
// over here, and only the positions it returns reach the detectors (at).
func (s *Scanner) skip(t string, i int) int {
	cl := &s.class
	for i < len(t) {
		c := t[i]
		k := cl[c]
		if k == 0 {
			i++ // starts nothing: most spaces and punctuation
			continue
		}
		if k&clWord == 0 {
			if i+1 < len(t) {
				c1 := t[i+1]
				switch {
				case k&clAt != 0:
					// email: a local part before, a domain after.
					if i > 0 && isLocalByte(t[i-1]) && isDomainByte(c1) {
						return i
					}
				case k&clPhone != 0:
					// phone: "+" and a digit but 0, "(" and a digit.
					if (i == 0 || !isAlnum(t[i-1])) && (c == '+' && c1 >= '1' && c1 <= '9' || c == '(' && isDigit(c1)) {
						return i
					}
				case k&clAssign != 0:
					// assignment: a name before, perhaps quoted, whose
					// last letter ends one of secretWords (nameMay; the
					// byte before decides for most).
					j := i
					if j > 0 && (t[j-1] == '"' || t[j-1] == '\'') {
						j--
					}
					if j > 0 {
						if b := t[j-1]; (isLetter(b) && secretLast[b|0x20] || isDigit(b) || b == '_' || b == '-' || b == '.') && nameMay(t, j) {
							return i
						}
					}
				case k&clCred != 0:
					// "-----BEGIN ": a prefix's second byte.
					if credSecond[c][c1>>6]&(1<<(c1&63)) != 0 && startsWord(t, i) {
						return i
					}
				default: // clThreat
					if threatMark(c, c1) {
						return i
					}
				}
			}
			i++
			continue
		}
		ws := i
		i++
		if k&clDigit != 0 {
			i = digitsEnd(t, i)
			if n := uint(i - ws); (s.digitRuns&(1<<n) != 0 || s.phoneRuns&(1<<n) != 0 && i < len(t) && isPhoneSep(t[i])) && s.digitsMay(t, ws, int(n)) {
				return ws
			}
		} else if k&(clCred|clIBAN) != 0 && i < len(t) {
			c1 := t[i]
			if (k&clCred != 0 && credSecond[c][c1>>6]&(1<<(c1&63)) != 0 ||
				k&clIBAN != 0 && isUpper(c1) && i+2 < len(t) && isDigit(t[i+1]) && isDigit(t[i+2])) && startsWord(t, ws) {
				return ws
			}
		}
		i = wordEnd(cl, t, i)
		// The threat detectors start at a word (wordHit) that is a blob's
		// start (16 bytes or more) or a cue.
		if n := uint(i - ws); s.threat && (n >= 16 && blobLead[c] || n < 16 && cueLen[c]&(1<<n) != 0 && cueHit(c, t[i-1], n)) {
			return ws
		}
	}
	return i
}

// digitsEnd returns the end of the run of digits that goes on at t[i].
func digitsEnd(t string, i int) int {
	j := uint(i) // unsigned: the loop needs no check of t's bounds
	for j < uint(len(t)) && isDigit(t[j]) {
		j++
	}
	return int(j)
}

// wordEnd returns the end of the ASCII word (clWord in cl) that goes on
// at t[i]: i itself if t[i] is no word byte.
func wordEnd(cl *byteClasses, t string, i int) int {
	// An unsigned index: the loop needs no check of t's bounds.
	j := uint(i)
	for j < uint(len(t)) && cl[t[j]]&clWord != 0 {
		j++
	}
	return int(j)
}

// runLengths returns the Scanner's digitRuns and phoneRuns for the kinds
// on: the lengths of a run of digits that digitsMay may take.
func runLengths(on *[numKinds]bool) (digits, phone uint32) {
	set := func(ok bool, from, to int) {
		for n := from; ok && n <= to; n++ {
			digits |= 1 << n
		}
	}
	set(on[KindDOB], 2, 2)
	set(on[KindSSN], 3, 3)
	set(on[KindDOB] || on[KindCard], 4, 4)
	set(on[KindSSN], 9, 9)
	set(on[KindCard], 12, 19)
	if on[KindPhone] {
		phone = 1<<7 - 1<<1 // 1 to 6 digits
	}
	return digits, phone
}

// digitsMay reports whether the run of n digits at t[i] (n a length of
// digitRuns or phoneRuns, 1 to 19) may start a finding of a kind that is
// on (numeric): not after a letter or a number's part (numberStart),
// and followed by what a card, an SSN, a date or a phone number of that
// first group needs (cardMay, ssnMay, dateMay, phoneMay).
func (s *Scanner) digitsMay(t string, i, n int) bool {
	if !numberStart(t, i) {
		return false // a part of a date, a version, a time
	}
	on := &s.on
	switch n {
	case 2:
		if on[KindDOB] && dateMay(t, i, n) {
			return true
		}
	case 3:
		if on[KindSSN] && ssnMay(t, i) {
			return true
		}
	case 4:
		if on[KindDOB] && dateMay(t, i, n) || on[KindCard] && cardMay(t, i) {
			return true
		}
	case 9:
		if on[KindSSN] {
			return true
		}
	default:
		if on[KindCard] && n >= 12 && n <= 19 && iinPrefix(t[i:i+4]) {
			return true
		}
	}
	return on[KindPhone] && phoneMay(t, i, n)
}

// cardMay reports whether the four digits at t[i] may start a card
// number in groups (card): an issuer's prefix, a separator and a second
// group of three digits or more.
func cardMay(t string, i int) bool {
	e := i + 4
	return e+3 < len(t) && (t[e] == ' ' || t[e] == '-' || t[e] == '.') && isDigit(t[e+1]) && isDigit(t[e+2]) && isDigit(t[e+3]) && iinPrefix(t[i:e])
}

// ssnMay reports whether the three digits at t[i] may start an SSN in
// groups (ssn): 3-2-4 with one separator, an area not in the 900s.
func ssnMay(t string, i int) bool {
	e := i + 3
	return e+8 <= len(t) && (t[e] == '-' || t[e] == ' ') && t[e+3] == t[e] && t[i] != '9'
}

// dateMay reports whether the n digits at t[i] (2 or 4) may start a date
// (date): ten bytes, a separator after them and the same one three bytes
// on, and the end of a number after the ten.
func dateMay(t string, i, n int) bool {
	e := i + n
	return i+10 <= len(t) && isDateSep(t[e]) && t[e+3] == t[e] && numberEnds(t, i+10)
}

// phoneMay reports whether the n digits at t[i] may start a phone number
// in national format (readPhone): a first group of 2 to 6 digits, a
// separator and a second group that is not one digit followed by
// another group ("978-3-16-148410-0"), or "8 (" (Russia's trunk prefix
// and an area code).
func phoneMay(t string, i, n int) bool {
	e := i + n
	if n > 6 || e+2 >= len(t) || !isPhoneSep(t[e]) {
		return false
	}
	if t[e+1] == '(' {
		return true
	}
	return isDigit(t[e+1]) && n > 1 && !(e+3 < len(t) && isPhoneSep(t[e+2]) && isDigit(t[e+3]))
}

// threatMark reports whether the threat detectors may start at c, a
// byte of trThreat, followed by c1 (markHit).
func threatMark(c, c1 byte) bool {
	switch c {
	case '<':
		return c1 == '|' || c1 == '<' || c1 == '!' || c1 == '/' || isLetter(c1)
	case '!':
		return c1 == '['
	case '~':
		return c1 == '/'
	case 0xf3:
		return c1 == 0xa0
	case 0xe2:
		return c1 == 0x80 || c1 == 0x81
	case 0xef:
		return c1 == 0xbb
	}
	return true // '[': a chat-template token or a markdown link
}

// threatGate reports whether the threat detectors may start at the word
// t[ws:we]: its first byte and length are a cue's (maybeCue), or it is
// long enough to start a blob, or a base64 blob goes on after it.
func threatGate(t string, ws, we int) bool {
	return we-ws >= 16 || maybeCue(t, ws, we) || we+1 < len(t) && (t[we] == '+' || t[we] == '/') && b64Next(t, ws, we)
}

// text appends the findings in t, one decoded string; member is the raw
// key of the member t is the value of (nil for none); lib counts down the
// phone candidates the library may still check (phoneLibBudget).
func (s *Scanner) text(t string, member []byte, dst []Finding, lib *int) []Finding {
	return s.textFrom(t, s.skip(t, 0), member, dst, lib)
}

// textFrom is text given i, skip(t, 0). A caller that finds i == len(t)
// and !s.memberMay(t, member) knows that t holds no finding without
// calling it.
func (s *Scanner) textFrom(t string, i int, member []byte, dst []Finding, lib *int) []Finding {
	mark := len(dst)
	for ; i < len(t); i = s.skip(t, i) {
		h, next := s.at(t, i, member, lib, lastEnd(dst, mark))
		if h.start < 0 {
			i = next
			continue
		}
		// An email's local part starts before its '@' and may reach back
		// over text already passed; nothing else does.
		dst = append(dst, h.finding())
		i = h.end
		if h.rule == "aws-access-key-id" {
			if g := awsSecretAfter(t, h.end); g.start >= 0 {
				dst = append(dst, g.finding())
				i = g.end
			}
		}
	}
	if len(dst) == mark && s.memberMay(t, member) {
		if h := secretMember(t, member); h.start >= 0 {
			dst = append(dst, h.finding())
		}
	}
	return dst
}

// memberMay reports whether t, the value of the member named member, may
// be a secret for its name alone (secretMember): credentials are on, and
// both are long enough.
func (s *Scanner) memberMay(t string, member []byte) bool {
	return len(member) >= secretKeys.least && len(t) >= 8 && s.on[KindCredential]
}

// at runs the detectors that may start at t[i], where skip stopped. It
// returns the finding, or noHit and the position to go on from. floor
// is where the last finding of t ends (email).
func (s *Scanner) at(t string, i int, member []byte, lib *int, floor int) (hit, int) {
	c := t[i]
	tr := trigger[c]
	h := noHit
	if !wordASCII[c] {
		// A byte of class clMark: its kind is on.
		switch {
		case tr&trAt != 0:
			h = email(t, i, floor)
		case tr&(trPlus|trParen) != 0:
			if i == 0 || !isAlnum(t[i-1]) {
				h = s.phone(t, i, lib)
			}
		case tr&trAssign != 0:
			h = assignment(t, i)
		case tr&trDash != 0:
			if startsWord(t, i) {
				h = credential(t, i)
			}
		default: // trThreat
			h = s.markHit(t, i)
		}
		return h, i + 1
	}
	// A word (ASCII letters, digits, '_'): findings start only at its
	// first byte; the rest of it is passed over.
	switch {
	case tr&trDigit != 0:
		if numberStart(t, i) {
			h = s.numeric(t, i, member, lib)
		}
	case tr&(trCred|trUpper) != 0 && startsWord(t, i):
		if tr&trCred != 0 && s.on[KindCredential] {
			h = credential(t, i)
		}
		if h.start < 0 && tr&trUpper != 0 && s.on[KindIBAN] {
			h = iban(t, i)
		}
	}
	if h.start >= 0 {
		return h, h.end
	}
	we := wordEnd(&s.class, t, i+1)
	if s.threat && threatGate(t, i, we) {
		h = s.wordHit(t, i, we, true)
	}
	return h, we
}

// b64Next reports whether the word t[ws:j] may start a base64 blob that
// goes on after it: '+' or '/' and a letter or digit follow, and the
// word does not itself continue a run, a host name or a path (the blob
// detector then reads the whole run).
func b64Next(t string, ws, j int) bool {
	if j+1 >= len(t) || t[j] != '+' && t[j] != '/' || !isAlnum(t[j+1]) {
		return false
	}
	return ws == 0 || !isB64(t[ws-1]) && t[ws-1] != '-' && t[ws-1] != '_' && t[ws-1] != '.'
}

// lastEnd is where the last finding appended after mark ends (0 if none).
func lastEnd(dst []Finding, mark int) int {
	if len(dst) > mark {
		return dst[len(dst)-1].End
	}
	return 0
}

// numeric tries the detectors that start with a digit at t[i]. The
// length of the run of digits there tells which can match: a card starts
// with 4 or 12 or more digits, an SSN with 3 (9 bare digits), a date with
// 2 or 4, a phone number in national format with a group of 2 to 6
// followed by a separator (or "8 (", Russia's trunk prefix and an area
// code).
func (s *Scanner) numeric(t string, i int, member []byte, lib *int) hit {
	n := runMax(t[i:], isDigit, 20)
	phone := s.on[KindPhone] && phoneMay(t, i, n)
	if n > 19 || !phone && (n == 1 || n >= 5 && n <= 8 || n >= 10 && n <= 11) {
		return noHit
	}
	on := &s.on
	if on[KindCard] && (n == 4 && cardMay(t, i) || n >= 12) {
		if f := card(t, i); f.start >= 0 {
			return f
		}
	}
	if on[KindSSN] && (n == 3 && ssnMay(t, i) || n == 9) {
		if f := ssn(t, i, member); f.start >= 0 {
			return f
		}
	}
	if on[KindDOB] && (n == 2 || n == 4) && dateMay(t, i, n) {
		if f := dob(t, i, member); f.start >= 0 {
			return f
		}
	}
	if phone {
		if f := s.phone(t, i, lib); f.start >= 0 {
			return f
		}
	}
	return noHit
}

// minNumberLen is the length of the shortest JSON number that may hold
// a finding (a bare SSN); the Scanner's walks do not visit shorter ones.
const minNumberLen = 9

// number scans a JSON number's literal: a card number, or a bare SSN in a
// member named like one.
func (s *Scanner) number(lit, member []byte, dst []Finding) []Finding {
	if len(lit) < minNumberLen || len(lit) > 19 {
		return dst
	}
	for _, c := range lit {
		if !isDigit(c) {
			return dst
		}
	}
	t := unsafe.String(unsafe.SliceData(lit), len(lit)) // read only, during this call
	if s.on[KindCard] {
		if h := card(t, 0); h.start == 0 && h.end == len(t) {
			return append(dst, h.finding())
		}
	}
	if s.on[KindSSN] && len(t) == 9 && validSSN(t[0:3], t[3:5], t[5:9]) && ssnKeyWords.inKey(member) {
		return append(dst, Finding{Kind: KindSSN, Rule: "ssn-bare", Start: 0, End: 9})
	}
	return dst
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isUpper(c byte) bool  { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool  { return c >= 'a' && c <= 'z' }
func isAlnum(c byte) bool  { return isDigit(c) || isLetter(c) }

// isWordByte reports whether c continues a word: an ASCII letter or digit,
// '_', or a byte of a non-ASCII character.
func isWordByte(c byte) bool { return isAlnum(c) || c == '_' || c >= 0x80 }

// isKeyByte: the base64url alphabet, which most API keys are written in.
func isKeyByte(c byte) bool { return isAlnum(c) || c == '_' || c == '-' }

func isB64(c byte) bool { return isAlnum(c) || c == '+' || c == '/' }

// startsWord reports whether a token may start at s[i]: not inside a
// word, a hyphenated word or a dotted name.
func startsWord(s string, i int) bool {
	if i == 0 {
		return true
	}
	c := s[i-1]
	return !isWordByte(c) && c != '-' && !(c == '.' && i >= 2 && isWordByte(s[i-2]))
}

// endsWord reports whether a token may end just before s[i]: at a word's
// end, and not where a dotted or hyphenated name (a host, a branch) goes
// on.
func endsWord(s string, i int) bool {
	if i == len(s) {
		return true
	}
	c := s[i]
	return !isWordByte(c) && !((c == '.' || c == '-') && i+1 < len(s) && isWordByte(s[i+1]))
}

// numberStart reports whether a number may start at s[i], a digit: not
// after a letter, a digit, or a digit and a separator ("v1.2", "12-3").
func numberStart(s string, i int) bool {
	if i == 0 {
		return true
	}
	switch numberBefore[s[i-1]] {
	case nbInside:
		return false
	case nbSep:
		return i < 2 || !isAlnum(s[i-2])
	}
	return true
}

// numberBefore classifies the byte before a number's first digit
// (numberStart): inside a word, a separator of a number's parts, or
// anything else (0).
var numberBefore = func() (t [256]uint8) {
	for c := range 256 {
		switch b := byte(c); {
		case isAlnum(b) || b == '_':
			t[c] = nbInside
		case b == '.' || b == '-' || b == '/' || b == ',':
			t[c] = nbSep
		}
	}
	return t
}()

const (
	nbInside = 1 + iota // a letter, a digit, '_'
	nbSep               // '.', '-', '/', ','
)

// numberEnds reports whether a number may end just before s[i]: not
// before a letter or digit, nor a separator and a digit.
func numberEnds(s string, i int) bool {
	if i == len(s) {
		return true
	}
	c := s[i]
	if isAlnum(c) || c == '_' {
		return false
	}
	if (c == '.' || c == '-' || c == '/' || c == ',') && i+1 < len(s) && isDigit(s[i+1]) {
		return false
	}
	return true
}

// run returns the length of the longest prefix of s made of bytes in ok.
func run(s string, ok func(byte) bool) int {
	n := 0
	for n < len(s) && ok(s[n]) {
		n++
	}
	return n
}

// runMax is run stopped at limit bytes, so that rules with a bounded
// length cost a bounded time wherever they are tried.
func runMax(s string, ok func(byte) bool, limit int) int {
	return run(s[:min(len(s), limit)], ok)
}

// fewWords reports whether fewer than three of the parts of b, split at
// any byte other than a letter or a digit, are shaped like words: three
// letters or more, in lower case, capitalized or in upper case.
func fewWords(b string) bool {
	words := 0
	for i := 0; i < len(b); {
		n := run(b[i:], isAlnum)
		if isWord(b[i : i+n]) {
			words++
		}
		i += n + 1
	}
	return words < 3
}

// isWord reports whether w is three letters or more, in lower case,
// capitalized or in upper case.
func isWord(w string) bool {
	if len(w) < 3 || run(w, isLetter) != len(w) {
		return false
	}
	return run(w[1:], isLower) == len(w)-1 || run(w, isUpper) == len(w)
}

// looksRandom reports whether b, the body of a credential whose format
// does not fix its length, looks generated rather than written: it has
// both letters and digits, and few words.
func looksRandom(b string) bool {
	return strings.ContainsFunc(b, func(r rune) bool { return r < 0x80 && isLetter(byte(r)) }) &&
		strings.ContainsAny(b, "0123456789") && fewWords(b)
}

// caseMixed reports whether b changes between lower and upper case
// letters at least four times, as random base64 without digits does and
// written words do not.
func caseMixed(b string) bool {
	changes := 0
	for i := 1; i < len(b); i++ {
		if isLetter(b[i-1]) && isLetter(b[i]) && (b[i-1] < 'a') != (b[i] < 'a') {
			changes++
		}
	}
	return changes >= 4
}

// mixedOrRandom reports whether b looks random, or has few words and
// letters whose case is mixed in place of digits.
func mixedOrRandom(b string) bool {
	return looksRandom(b) || caseMixed(b) && fewWords(b)
}

// entropy is the Shannon entropy of b's bytes, in bits per byte.
func entropy(b string) float64 {
	var counts [256]uint16
	for i := 0; i < len(b); i++ {
		counts[b[i]]++
	}
	h, n := 0.0, float64(len(b))
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}

// contextBefore reports whether one of words (lower case) ends within
// window bytes before t[i], compared case-insensitively, each at a word
// start.
func contextBefore(t string, i, window int, words []string) bool {
	from := max(0, i-window)
	for _, w := range words {
		for j := i - len(w); j >= from; j-- {
			if !strings.EqualFold(t[j:j+len(w)], w) {
				continue
			}
			if j == 0 || !isLetter(t[j-1]) {
				return true
			}
		}
	}
	return false
}

// keyWords are words (lower case) looked for in member keys (inKey),
// indexed by their first byte.
type keyWords struct {
	words []string
	least int         // the length of the shortest word
	first [256]uint16 // bit k at [c]: words[k] starts with c
}

func newKeyWords(words ...string) *keyWords {
	if len(words) > 16 {
		panic("scan: more than 16 key words")
	}
	kw := &keyWords{words: words, least: math.MaxInt}
	for k, w := range words {
		kw.least = min(kw.least, len(w))
		kw.first[w[0]] |= 1 << k
	}
	return kw
}

// inKey reports whether the member key holds one of the words, ignoring
// case and any byte that is not a letter (so a word with another byte is
// never found).
func (kw *keyWords) inKey(member []byte) bool {
	if len(member) < kw.least || len(member) > 64 {
		return false
	}
	var buf [64]byte
	n := 0
	for _, c := range member {
		if isLetter(c) {
			buf[n] = c | 0x20
			n++
		}
	}
	// Read only, during this call: no copy of the folded key.
	k := unsafe.String(&buf[0], n)
	for p := 0; p+kw.least <= n; p++ {
		for m := kw.first[k[p]]; m != 0; m &= m - 1 {
			if strings.HasPrefix(k[p:], kw.words[bits.TrailingZeros16(m)]) {
				return true
			}
		}
	}
	return false
}
