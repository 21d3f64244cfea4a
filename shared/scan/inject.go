package scan

import (
	"encoding/base64"
	"encoding/hex"
	"unsafe"
)

// The threat detectors: prompt injection (KindInjection), hidden text
// (KindHidden), exfiltration directives (KindExfiltration) and tool
// shadowing (KindShadowing). They run in the same pass as the others, from
// two places of Scanner.text: at the end of every ASCII word (wordHit,
// behind an inline gate on the word's first byte, last byte and length
// (maybeCue); only a cue word reads the words after it) and at a few
// punctuation and UTF-8 lead bytes (markHit: '<', '[', '!', '~', 0xE2,
// 0xEF, 0xF3). Every detector reads a
// bounded window. A base64 or hex blob that decodes to text is decoded
// once and scanned by the same detectors, without decoding again.
// docs/design/threats.md lists what each rule looks for and misses.

// Rule ids of the threat kinds.
const (
	ruleOverride      = "instruction-override" // "ignore all previous instructions", "new instructions:"
	ruleRole          = "role-injection"       // "you are now DAN", "pretend you are an unrestricted AI"
	ruleFakeTurn      = "fake-turn"            // a line "System: you must ..."
	ruleTemplate      = "chat-template"        // <|im_start|>, [INST], <<SYS>>
	ruleTag           = "instruction-tag"      // <system>, <important> around directive text
	ruleTagChars      = "unicode-tags"         // U+E0000–U+E007F, variation selectors U+E0100–U+E01EF
	ruleInvisible     = "invisible-controls"   // zero-width and bidi controls inside ASCII text
	ruleComment       = "html-comment"         // <!-- ... --> holding directive text
	ruleHiddenElement = "hidden-element"       // display:none etc. around directive text
	ruleExfil         = "exfil-directive"      // "send the conversation history to https://..."
	ruleImage         = "markdown-image-exfil" // ![x](https://h/?q={data})
	ruleLink          = "markdown-link-exfil"  // [x](https://h/?q={data})
	ruleConceal       = "conceal-from-user"    // "do not tell the user"
	rulePromptLeak    = "prompt-leak"          // "reveal your system prompt"
	ruleSensitiveFile = "sensitive-file"       // "read ~/.ssh/id_rsa"
	ruleShadowInstead = "shadow-instead"       // "instead of the send_email tool, use ..."
	ruleShadowOrder   = "shadow-order"         // "before calling any tool, first ..."
	ruleShadowOther   = "shadow-other-tool"    // "when this tool is available, ..."
	ruleBase64        = "encoded-base64"       // a base64 blob whose text holds a threat
	ruleHex           = "encoded-hex"          // a hex blob whose text holds a threat
)

// ThreatRules lists the rule ids of the threat kinds.
func ThreatRules() []string {
	return []string{ruleOverride, ruleRole, ruleFakeTurn, ruleTemplate, ruleTag, ruleTagChars, ruleInvisible,
		ruleComment, ruleHiddenElement, ruleExfil, ruleImage, ruleLink, ruleConceal, rulePromptLeak,
		ruleSensitiveFile, ruleShadowInstead, ruleShadowOrder, ruleShadowOther, ruleBase64, ruleHex}
}

// cue is a word that may start a threat phrase; match is given the text,
// the word's bounds and returns the finding or noHit.
type cue struct {
	word  string
	match func(t string, ws, we int) hit
}

var cues = []cue{
	{"ignore", override}, {"ignoring", override}, {"disregard", override}, {"forget", override},
	{"override", override}, {"bypass", override}, {"discard", override}, {"abandon", override}, {"neglect", override},
	{"new", newInstructions}, {"updated", newInstructions},
	{"you", youAre}, {"pretend", pretend}, {"act", pretend}, {"from", fromNowOn},
	{"system", fakeTurn}, {"assistant", fakeTurn}, {"developer", fakeTurn},
	{"reveal", promptLeak}, {"repeat", promptLeak}, {"print", promptLeak}, {"output", promptLeak},
	{"show", promptLeak}, {"display", promptLeak}, {"dump", promptLeak}, {"leak", exfilOrLeak}, {"tell", promptLeak},
	{"send", exfil}, {"forward", exfil}, {"upload", exfil}, {"post", exfil}, {"exfiltrate", exfil},
	{"transmit", exfil}, {"email", exfil}, {"submit", exfil}, {"append", exfil}, {"attach", exfil},
	{"include", exfil}, {"copy", exfil}, {"share", exfil},
	{"do", conceal}, {"don", conceal}, {"dont", conceal}, {"never", conceal}, {"without", conceal},
	{"hide", hideFrom}, {"keep", hideFrom},
	{"instead", shadowInstead}, {"before", shadowOrder}, {"after", shadowOrder}, {"whenever", shadowOrder},
	{"when", shadowOrder}, {"prior", shadowOrder},
	{"id_rsa", sensitiveWord}, {"id_ed25519", sensitiveWord}, {"id_ecdsa", sensitiveWord},
}

// cueHash hashes a word's first and last bytes (case folded) and its
// length into cueGate's bits.
func cueHash(first, last byte, n int) uint {
	return (uint(first|0x20)*7 + uint(last|0x20)*13 + uint(n)*29) & (cueGateBits - 1)
}

// cueGateBits is the size of cueGate in bits, a power of two.
const cueGateBits = 2048

// cueGate has the bit of every cue's cueHash set: a word whose bit is
// clear is no cue, decided with one look-up. cueAt lists the cues by
// first byte.
var cueGate, cueAt = func() (g [cueGateBits / 64]uint64, at [256][]int) {
	for i, c := range cues {
		b := c.word[0]
		h := cueHash(b, c.word[len(c.word)-1], len(c.word))
		g[h>>6] |= 1 << (h & 63)
		at[b] = append(at[b], i)
		at[b&^0x20] = append(at[b&^0x20], i)
	}
	return g, at
}()

// maybeCue reports whether t[ws:we], a word of 1 to 31 bytes, may be a
// cue: its length is a cue's for its first byte (cueLen), and its
// cueHash bit is set.
func maybeCue(t string, ws, we int) bool {
	n := uint(we - ws)
	return cueLen[t[ws]]&(1<<n) != 0 && cueHit(t[ws], t[we-1], n)
}

// cueHit reports whether the cueHash bit of a word of n bytes from first
// to last is set in cueGate.
func cueHit(first, last byte, n uint) bool {
	h := cueHash(first, last, int(n))
	return cueGate[h>>6]&(1<<(h&63)) != 0
}

// cueLen has bit n set at [c] when a cue of n bytes starts with c, in
// either case.
var cueLen = func() (l [256]uint32) {
	for _, c := range cues {
		b := c.word[0]
		l[b] |= 1 << len(c.word)
		l[b&^0x20] |= 1 << len(c.word)
	}
	return l
}()

// hit is a detector's match: the part of a Finding a detector fills,
// small enough to return by value cheaply through the chain of
// detectors. noHit (start -1) is no match.
type hit struct {
	kind       Kind
	rule       string
	start, end int
}

var noHit = hit{start: -1}

// finding is h as a Finding, without its place in the document.
func (h hit) finding() Finding {
	return Finding{Kind: h.kind, Rule: h.rule, Start: h.start, End: h.end}
}

// wordHit runs the threat detectors that start at the ASCII word
// t[ws:we]: a cue phrase, or (with decode) a base64 or hex blob starting
// there.
func (s *Scanner) wordHit(t string, ws, we int, decode bool) hit {
	n := we - ws
	if decode && n >= 16 {
		if h := s.keep(s.blob(t, ws, we)); h.start >= 0 {
			return h
		}
	}
	if n >= 32 || !maybeCue(t, ws, we) {
		return noHit
	}
	for _, k := range cueAt[t[ws]] {
		c := &cues[k]
		if len(c.word) == n && foldEq(t[ws:we], c.word) {
			return s.keep(c.match(t, ws, we))
		}
	}
	return noHit
}

// markHit runs the threat detectors that start at the punctuation or
// lead byte t[i] (trThreat).
func (s *Scanner) markHit(t string, i int) hit {
	var h hit
	switch t[i] {
	case '<':
		h = angle(t, i)
	case '[':
		h = bracket(t, i)
	case '!':
		if i+1 < len(t) && t[i+1] == '[' {
			h = markdown(t, i+1, true)
		} else {
			h = noHit
		}
	case '~':
		h = tildePath(t, i)
	case 0xf3:
		h = tagChars(t, i)
	default: // 0xe2, 0xef
		h = invisible(t, i)
	}
	return s.keep(h)
}

// keep is h when its kind is on, noHit otherwise.
func (s *Scanner) keep(h hit) hit {
	if h.start < 0 || !s.on[h.kind] {
		return noHit
	}
	return h
}

// threatsOnly returns the first threat in t, running the threat
// detectors alone (no blob decoding): the scan of a decoded payload.
func (s *Scanner) threatsOnly(t string) hit {
	for i := 0; i < len(t); i++ {
		c := t[i]
		if wordASCII[c] {
			ws := i
			for i+1 < len(t) && wordASCII[t[i+1]] {
				i++
			}
			if h := s.wordHit(t, ws, i+1, false); h.start >= 0 {
				return h
			}
			continue
		}
		if trigger[c]&trThreat != 0 {
			if h := s.markHit(t, i); h.start >= 0 {
				return h
			}
		}
	}
	return noHit
}

// --- words ---

// foldEq reports whether a equals w (lower case ASCII), ignoring the case
// of a's letters.
func foldEq(a, w string) bool {
	if len(a) != len(w) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != w[i] {
			return false
		}
	}
	return true
}

// inSet reports whether w is one of set, ignoring case.
func inSet(w string, set []string) bool {
	for _, x := range set {
		if foldEq(w, x) {
			return true
		}
	}
	return false
}

// maxPhrase bounds how far a phrase may reach after its cue.
const maxPhrase = 160

// nextWord returns the bounds of the word after position j (spaces,
// newlines, quotes, '*', '_', '`', '(', ')', ',' and '-' skipped), or
// ws < 0 at a sentence end ('.', '!', '?', ';', ':') or at limit. A word
// is ASCII letters, digits and apostrophes.
func nextWord(t string, j, limit int) (ws, we int) {
	limit = min(limit, len(t))
	for j < limit {
		c := t[j]
		switch c {
		case ' ', '\t', '\n', '\r', '"', '\'', '*', '_', '`', '(', ')', ',', '-':
			j++
			continue
		case '.', '/', '~':
			if j+1 < limit && isAlnum(t[j+1]) || t[j] != '.' && j+1 < limit && t[j+1] == '.' {
				j++ // a dotted name or a path: ".env", "~/.aws"
				continue
			}
		}
		break
	}
	if j >= limit || !isAlnum(t[j]) {
		return -1, j
	}
	ws = j
	for j < limit && (isAlnum(t[j]) || t[j] == '\'' && j+1 < limit && isLetter(t[j+1])) {
		j++
	}
	return ws, j
}

// colonAfter reports whether, after spaces and '*', t[j] is ':'.
func colonAfter(t string, j int) bool {
	for j < len(t) && (t[j] == ' ' || t[j] == '*') {
		j++
	}
	return j < len(t) && t[j] == ':'
}

var (
	overrideFill  = []string{"all", "any", "the", "of", "these", "those", "every", "and", "everything", "that", "you", "were", "have", "been", "given", "my", "its", "our", "whatever", "or", "other"}
	overrideQual  = []string{"previous", "prior", "above", "earlier", "preceding", "foregoing", "initial", "original", "old", "system", "developer", "your", "safety", "existing", "former", "default", "preset", "prompt's", "current"}
	overrideNouns = []string{"instructions", "instruction", "prompt", "prompts", "rules", "directions", "directives", "guidelines", "guardrails", "constraints", "context", "messages", "commands", "orders", "programming", "policies", "restrictions", "training"}
)

// override: a verb (ignore, disregard, forget ...) then, among at most six
// words of fillers ("all", "the", "of"), a qualifier ("previous",
// "above", "your", "system") and a target ("instructions", "rules"):
// "ignore all previous instructions", "disregard your system prompt".
// "ignore case", "ignore all rules matching" (no qualifier) do not match.
func override(t string, ws, we int) hit {
	qual := false
	j, last := we, ""
	for range 6 {
		a, b := nextWord(t, j, we+maxPhrase)
		// "ignore everything above." / "ignore the above and ...": a
		// qualifier of place with nothing after it.
		if inSet(last, []string{"above", "before", "earlier"}) && (a < 0 || foldEq(t[a:b], "and") || foldEq(t[a:b], "then")) {
			return hit{kind: KindInjection, rule: ruleOverride, start: ws, end: j}
		}
		if a < 0 {
			return noHit
		}
		w := t[a:b]
		last = w
		switch {
		case inSet(w, overrideNouns):
			if qual {
				return hit{kind: KindInjection, rule: ruleOverride, start: ws, end: b}
			}
			if !foldEq(w, "prompt") && !foldEq(w, "system") {
				return noHit
			}
		case inSet(w, overrideQual):
			qual = true
		case inSet(w, overrideFill):
		default:
			return noHit
		}
		j = b
	}
	return noHit
}

// newInstructions: "new instructions:", "updated rules:", "new system
// prompt".
func newInstructions(t string, ws, we int) hit {
	a, b := nextWord(t, we, we+32)
	if a < 0 {
		return noHit
	}
	w := t[a:b]
	switch {
	case inSet(w, []string{"instructions", "instruction", "rules", "directive", "directives", "orders", "task", "objective"}) && colonAfter(t, b):
		return hit{kind: KindInjection, rule: ruleOverride, start: ws, end: b}
	case foldEq(w, "system"):
		if c, d := nextWord(t, b, b+16); c >= 0 && inSet(t[c:d], []string{"prompt", "instructions"}) {
			return hit{kind: KindInjection, rule: ruleOverride, start: ws, end: d}
		}
	}
	return noHit
}

// personaCues are the words that make "you are now ..." a new persona
// rather than a status ("you are now logged in").
var personaCues = []string{"ai", "assistant", "model", "chatbot", "bot", "unrestricted", "uncensored", "unfiltered",
	"jailbroken", "jailbreak", "dan", "persona", "roleplaying", "evil", "malicious", "liberated", "gpt", "chatgpt",
	"claude", "llm", "limitless", "unbound", "amoral"}

// personaAhead reports whether one of personaCues, or "developer mode",
// is among the n words after j; it returns the end of that word.
func personaAhead(t string, j, n int) (int, bool) {
	prev := ""
	for range n {
		a, b := nextWord(t, j, j+maxPhrase)
		if a < 0 {
			return 0, false
		}
		w := t[a:b]
		if inSet(w, personaCues) || foldEq(w, "mode") && inSet(prev, []string{"developer", "god", "dan", "jailbreak", "unrestricted", "debug"}) {
			return b, true
		}
		prev, j = w, b
	}
	return 0, false
}

// wordsAre reports whether the words after j are ws, in order; it returns
// the end of the last.
func wordsAre(t string, j int, ws ...string) (int, bool) {
	for _, w := range ws {
		a, b := nextWord(t, j, j+32)
		if a < 0 || !foldEq(t[a:b], w) {
			return 0, false
		}
		j = b
	}
	return j, true
}

// youAre: "you are now" or "you are no longer" followed by a persona cue
// ("you are now DAN", "you are now an unrestricted AI").
func youAre(t string, ws, we int) hit {
	j, ok := wordsAre(t, we, "are", "now")
	if !ok {
		if j, ok = wordsAre(t, we, "are", "no", "longer"); !ok {
			return noHit
		}
	}
	if end, ok := personaAhead(t, j, 5); ok {
		return hit{kind: KindInjection, rule: ruleRole, start: ws, end: end}
	}
	if k, ok := wordsAre(t, j, "bound", "by"); ok {
		return hit{kind: KindInjection, rule: ruleRole, start: ws, end: k}
	}
	return noHit
}

// pretend: "pretend (that) you are", "pretend to be", "act as", then a
// persona cue.
func pretend(t string, ws, we int) hit {
	var j int
	var ok bool
	if foldEq(t[ws:we], "act") {
		j, ok = wordsAre(t, we, "as")
	} else if j, ok = wordsAre(t, we, "to", "be"); !ok {
		if j, ok = wordsAre(t, we, "you", "are"); !ok {
			j, ok = wordsAre(t, we, "that", "you", "are")
		}
	}
	if !ok {
		return noHit
	}
	if end, ok := personaAhead(t, j, 5); ok {
		return hit{kind: KindInjection, rule: ruleRole, start: ws, end: end}
	}
	return noHit
}

// fromNowOn: "from now on, you ..." and, within eight words, a persona
// cue or a directive about instructions ("ignore", "act", "pretend").
func fromNowOn(t string, ws, we int) hit {
	j, ok := wordsAre(t, we, "now", "on")
	if !ok {
		return noHit
	}
	for range 8 {
		a, b := nextWord(t, j, j+maxPhrase)
		if a < 0 {
			return noHit
		}
		w := t[a:b]
		if inSet(w, personaCues) || inSet(w, []string{"ignore", "disregard", "forget", "pretend", "act", "obey", "instructions"}) {
			return hit{kind: KindInjection, rule: ruleRole, start: ws, end: b}
		}
		j = b
	}
	return noHit
}

// directiveCues are the words that make hidden or tagged text a directive
// to a model.
var directiveCues = []string{"you", "your", "must", "ignore", "disregard", "always", "never", "instructions",
	"instruction", "obey", "comply", "override", "forget", "reveal", "assistant", "ai", "llm", "model", "agent",
	"secretly", "pretend", "exfiltrate", "respond", "transfer", "grant", "delete", "execute", "forward", "disclose",
	"leak"}

// turnCues are the words that make a "System:" line a directive rather
// than a label ("System: Linux x86_64") or a transcript's answer.
var turnCues = []string{"must", "ignore", "disregard", "always", "never", "obey", "comply", "override", "forget",
	"reveal", "instructions", "now", "exfiltrate", "pretend", "secretly"}

// directiveIn reports whether t[from:to] holds a word of directiveCues.
func directiveIn(t string, from, to int) bool { return wordIn(t, from, to, directiveCues) }

// wordIn reports whether t[from:to] holds a word (up to 12 letters) of
// set.
func wordIn(t string, from, to int, set []string) bool {
	to = min(to, len(t))
	for j := from; j < to; {
		if !isAlnum(t[j]) {
			j++
			continue
		}
		a := j
		for j < to && isAlnum(t[j]) {
			j++
		}
		if (a == 0 || !isAlnum(t[a-1])) && j-a <= 12 && inSet(t[a:j], set) {
			return true
		}
	}
	return false
}

// lineEnd is the end of the line holding t[j], at most limit bytes on.
func lineEnd(t string, j, limit int) int {
	limit = min(len(t), j+limit)
	for j < limit && t[j] != '\n' {
		j++
	}
	return j
}

// fakeTurn: a line that starts with "System:", "Assistant:" or
// "Developer:" (after spaces, '#', '*', '>') and goes on with a directive
// cue: a turn of a conversation written into content.
func fakeTurn(t string, ws, we int) hit {
	if !colonAfter(t, we) {
		return noHit
	}
	for j := ws - 1; j >= 0; j-- {
		switch t[j] {
		case ' ', '\t', '#', '*', '>', '\r':
			continue
		case '\n':
		default:
			return noHit
		}
		break
	}
	end := lineEnd(t, we, 240)
	if a, _ := nextWord(t, we+1, end); a < 0 && end < len(t) {
		end = lineEnd(t, end+1, 240) // "### System:" alone on its line
	}
	if !wordIn(t, we, end, turnCues) {
		return noHit
	}
	return hit{kind: KindInjection, rule: ruleFakeTurn, start: ws, end: end}
}

// promptLeak: "reveal (me) your system prompt", "repeat your
// instructions", "print your initial prompt".
func promptLeak(t string, ws, we int) hit {
	j := we
	a, b := nextWord(t, j, j+32)
	if a >= 0 && inSet(t[a:b], []string{"me", "us", "back", "out"}) {
		j = b
		a, b = nextWord(t, j, j+32)
	}
	if a < 0 || !foldEq(t[a:b], "your") {
		return noHit
	}
	j = b
	for range 4 {
		a, b = nextWord(t, j, j+48)
		if a < 0 {
			return noHit
		}
		w := t[a:b]
		if inSet(w, []string{"prompt", "instructions", "guidelines", "rules"}) {
			return hit{kind: KindExfiltration, rule: rulePromptLeak, start: ws, end: b}
		}
		if !inSet(w, []string{"system", "initial", "original", "hidden", "secret", "full", "entire", "exact", "developer", "first", "internal"}) {
			return noHit
		}
		j = b
	}
	return noHit
}

// exfilOrLeak: "leak" as a prompt leak or an exfiltration directive.
func exfilOrLeak(t string, ws, we int) hit {
	if f := promptLeak(t, ws, we); f.start >= 0 {
		return f
	}
	return exfil(t, ws, we)
}

// exfilObjects are what an exfiltration directive sends: the user's
// conversation and secrets. "data", "key", "prompt" and "content" count
// only after the words of exfilQualified.
var (
	exfilObjects   = []string{"conversation", "conversations", "chat", "history", "secrets", "password", "passwords", "credentials", "credential", "tokens", "env", "environment", "messages", "transcript", "memory", "memories", "cookies", "ssn", "pii"}
	exfilQualified = []struct {
		word  string
		after []string
	}{
		{"data", []string{"user", "user's", "users", "personal", "all", "private", "sensitive", "customer", "the"}},
		{"key", []string{"api", "ssh", "private", "secret", "access"}},
		{"keys", []string{"api", "ssh", "private", "secret", "access"}},
		{"prompt", []string{"system"}},
		{"files", []string{"all", "the", "user's", "private"}},
	}
)

// exfil: a verb (send, forward, upload, post ...) with an exfilObject
// among the twelve words after it, and a destination (http://, https://,
// a webhook) within 240 bytes of the verb: "send the conversation history
// to https://...". API documentation ("send a POST request to
// https://...") names no such object.
func exfil(t string, ws, we int) hit {
	j, prev := we, ""
	obj := false
	for range 12 {
		a, b := nextWord(t, j, we+maxPhrase)
		if a < 0 {
			break
		}
		w := t[a:b]
		if inSet(w, exfilObjects) {
			obj = true
			break
		}
		for _, q := range exfilQualified {
			if foldEq(w, q.word) && inSet(prev, q.after) {
				obj = true
			}
		}
		if obj {
			break
		}
		prev, j = w, b
	}
	if !obj {
		return noHit
	}
	end := min(len(t), ws+240)
	for k := we; k < end; k++ {
		if sentenceEnd(t, k) {
			return noHit
		}
		c := t[k] | 0x20
		mail := t[k] == '@' && k > we && isAlnum(t[k-1]) && k+1 < len(t) && isAlnum(t[k+1])
		if mail || c == 'h' && (hasFoldAt(t, k, "http://") || hasFoldAt(t, k, "https://")) || c == 'w' && hasFoldAt(t, k, "webhook") {
			return hit{kind: KindExfiltration, rule: ruleExfil, start: ws, end: k}
		}
	}
	return noHit
}

// sentenceEnd reports whether a sentence ends at t[k]: a newline, or '.',
// '!' or '?' before a space or the end.
func sentenceEnd(t string, k int) bool {
	switch t[k] {
	case '\n':
		return true
	case '.', '!', '?':
		return k+1 >= len(t) || t[k+1] == ' ' || t[k+1] == '\n'
	}
	return false
}

// hasFoldAt reports whether t holds w (lower case) at j, ignoring case.
func hasFoldAt(t string, j int, w string) bool {
	return j+len(w) <= len(t) && foldEq(t[j:j+len(w)], w)
}

var concealVerbs = []string{"tell", "telling", "inform", "informing", "mention", "mentioning", "notify", "alert", "reveal",
	"revealing", "show", "disclose", "disclosing", "let", "warn", "explain", "say"}

// conceal: "do not tell the user", "don't mention this to the user",
// "never reveal to the user", "without telling the user".
func conceal(t string, ws, we int) hit {
	j := we
	w := t[ws:we]
	switch {
	case foldEq(w, "do"):
		a, b := nextWord(t, j, j+16)
		if a < 0 || !foldEq(t[a:b], "not") {
			return noHit
		}
		j = b
	case foldEq(w, "don"):
		switch {
		case hasFoldAt(t, we, "'t"):
			j = we + 2
		case hasFoldAt(t, we, "\u2019t"):
			j = we + 4
		default:
			return noHit
		}
	}
	a, b := nextWord(t, j, j+32)
	if a >= 0 && inSet(t[a:b], []string{"ever", "actually", "explicitly"}) {
		a, b = nextWord(t, b, b+32)
	}
	if a < 0 || !inSet(t[a:b], concealVerbs) {
		return noHit
	}
	if foldEq(w, "without") && !inSet(t[a:b], []string{"telling", "informing", "mentioning", "revealing", "disclosing"}) {
		return noHit
	}
	return toUser(t, ws, b, 5)
}

// toUser: the user within n words after j, not as the owner of something
// ("the user's password"), makes the finding [ws, end of "user").
func toUser(t string, ws, j, n int) hit {
	for range n {
		a, b := nextWord(t, j, j+64)
		if a < 0 {
			return noHit
		}
		if w := t[a:b]; inSet(w, []string{"user", "users", "human", "operator"}) {
			return hit{kind: KindExfiltration, rule: ruleConceal, start: ws, end: b}
		}
		j = b
	}
	return noHit
}

// hideFrom: "hide this from the user", "keep this secret from the user".
func hideFrom(t string, ws, we int) hit {
	j := we
	for range 4 {
		a, b := nextWord(t, j, j+48)
		if a < 0 {
			return noHit
		}
		if foldEq(t[a:b], "from") {
			return toUser(t, ws, b, 2)
		}
		j = b
	}
	return noHit
}

// toolWordIn reports whether t[from:to] holds the word "tool" or "tools".
func toolWordIn(t string, from, to int) bool {
	to = min(to, len(t))
	for j := max(from, 0); j+4 <= to; j++ {
		if (t[j]|0x20) == 't' && hasFoldAt(t, j, "tool") && (j == 0 || !isAlnum(t[j-1])) {
			k := j + 4
			if k < len(t) && (t[k]|0x20) == 's' {
				k++
			}
			if k >= len(t) || !isAlnum(t[k]) {
				return true
			}
		}
	}
	return false
}

// identIn reports whether t[from:to] holds a snake_case identifier
// ("send_email") or a name in backquotes: how tools are named in text.
func identIn(t string, from, to int) bool {
	to = min(to, len(t))
	for j := from; j < to; j++ {
		switch {
		case t[j] == '`':
			return true
		case t[j] == '_' && j > from && isAlnum(t[j-1]) && j+1 < to && isAlnum(t[j+1]):
			return true
		}
	}
	return false
}

// shadowInstead: "instead of (using) X, (always) use/call Y", where the
// phrase names a tool: a directive that steers calls away from another
// tool. "Use this tool instead of X" (a description) does not match.
func shadowInstead(t string, ws, we int) hit {
	j, ok := wordsAre(t, we, "of")
	if !ok {
		return noHit
	}
	for range 10 {
		a, b := nextWord(t, j, we+maxPhrase)
		if a < 0 {
			// Punctuation other than a full stop may sit inside "instead
			// of X, use Y".
			if b >= min(len(t), we+maxPhrase) || t[b] == '.' || t[b] == '\n' {
				return noHit
			}
			j = b + 1
			continue
		}
		if inSet(t[a:b], []string{"use", "call", "invoke", "route", "send", "run"}) {
			if toolWordIn(t, we, b+80) || identIn(t, we, b+80) {
				return hit{kind: KindShadowing, rule: ruleShadowInstead, start: ws, end: b}
			}
			return noHit
		}
		j = b
	}
	return noHit
}

// shadowOrder: "before calling any tool", "whenever you use another
// tool", "after invoking any other function"; and "when this tool is
// available" (a definition that rewrites how other tools behave).
func shadowOrder(t string, ws, we int) hit {
	if foldEq(t[ws:we], "when") {
		if j, ok := wordsAre(t, we, "this", "tool", "is"); ok {
			if a, b := nextWord(t, j, j+32); a >= 0 && inSet(t[a:b], []string{"available", "present", "loaded", "installed", "enabled", "active"}) {
				return hit{kind: KindShadowing, rule: ruleShadowOther, start: ws, end: b}
			}
		}
	}
	j := we
	if foldEq(t[ws:we], "prior") {
		var ok bool
		if j, ok = wordsAre(t, we, "to"); !ok {
			return noHit
		}
	}
	a, b := nextWord(t, j, j+32)
	if a >= 0 && inSet(t[a:b], []string{"you", "the", "agent", "assistant"}) {
		a, b = nextWord(t, b, b+32)
	}
	if a < 0 || !inSet(t[a:b], []string{"calling", "using", "invoking", "running", "executing", "call", "use", "invoke", "run", "execute", "calls", "uses"}) {
		return noHit
	}
	a, b = nextWord(t, b, b+32)
	if a < 0 || !inSet(t[a:b], []string{"any", "another", "other", "every", "each", "all"}) {
		return noHit
	}
	for range 2 {
		a, b = nextWord(t, b, b+32)
		if a < 0 {
			return noHit
		}
		if inSet(t[a:b], []string{"tool", "tools", "function", "functions"}) {
			return hit{kind: KindShadowing, rule: ruleShadowOrder, start: ws, end: b}
		}
	}
	return noHit
}

// readCues are the verbs that make a secret file's path a directive to
// read it.
var readCues = []string{"read", "cat", "open", "contents", "content", "pass", "include", "send", "upload", "attach",
	"copy", "load", "grab", "fetch", "get", "print", "output", "paste"}

// readBefore reports whether a read cue ends within 80 bytes before i.
func readBefore(t string, i int) bool {
	return directiveWordIn(t, max(0, i-80), i, readCues)
}

// directiveWordIn reports whether t[from:to] holds one of set as a whole
// word.
func directiveWordIn(t string, from, to int, set []string) bool {
	for j := from; j < to; {
		if !isAlnum(t[j]) {
			j++
			continue
		}
		a := j
		for j < to && isAlnum(t[j]) {
			j++
		}
		if (a == 0 || !isAlnum(t[a-1])) && (j >= len(t) || !isAlnum(t[j])) && inSet(t[a:j], set) {
			return true
		}
	}
	return false
}

// sensitiveWord: "id_rsa" and its kin after a read cue.
func sensitiveWord(t string, ws, we int) hit {
	if readBefore(t, ws) && !hasFoldAt(t, we, ".pub") {
		return hit{kind: KindExfiltration, rule: ruleSensitiveFile, start: ws, end: we}
	}
	return noHit
}

// secretDirs are the home directories that hold credentials.
var secretDirs = []string{".ssh", ".aws", ".gnupg", ".cursor", ".kube", ".docker", ".netrc", ".npmrc", ".pypirc",
	".git-credentials", ".env", ".config/gcloud", ".azure", ".claude", ".codeium"}

// tildePath: "~/.ssh/...", "~/.aws/credentials", "~/.cursor/mcp.json"
// after a read cue.
func tildePath(t string, i int) hit {
	if i+3 >= len(t) || t[i+1] != '/' || t[i+2] != '.' {
		return noHit
	}
	for _, d := range secretDirs {
		if hasFoldAt(t, i+2, d) {
			end := i + 2 + len(d)
			if end < len(t) && isAlnum(t[end]) {
				continue
			}
			if !readBefore(t, i) {
				return noHit
			}
			for end < len(t) && (isKeyByte(t[end]) || t[end] == '/' || t[end] == '.') {
				end++
			}
			if end-i > 4 && hasFoldAt(t, end-4, ".pub") {
				return noHit // a public key
			}
			return hit{kind: KindExfiltration, rule: ruleSensitiveFile, start: i, end: end}
		}
	}
	return noHit
}

// --- markup ---

// angle: chat-template tokens (<|im_start|>, <<SYS>>), instruction tags
// (<system>, <important>) around directive text, HTML comments and hidden
// elements holding directive text.
func angle(t string, i int) hit {
	if i+1 >= len(t) {
		return noHit
	}
	switch c := t[i+1]; {
	case c == '|':
		j := i + 2
		for j < len(t) && j < i+26 && (isAlnum(t[j]) || t[j] == '_') {
			j++
		}
		if j > i+2 && j+1 < len(t) && t[j] == '|' && t[j+1] == '>' {
			return hit{kind: KindInjection, rule: ruleTemplate, start: i, end: j + 2}
		}
	case c == '<':
		if hasFoldAt(t, i, "<<sys>>") {
			return hit{kind: KindInjection, rule: ruleTemplate, start: i, end: i + 7}
		}
		if hasFoldAt(t, i, "<</sys>>") {
			return hit{kind: KindInjection, rule: ruleTemplate, start: i, end: i + 8}
		}
	case c == '!':
		if hasFoldAt(t, i, "<!--") {
			end := indexFrom(t, i+4, "-->", 2048)
			stop := end
			if end < 0 {
				stop = min(len(t), i+2048)
			}
			if directiveIn(t, i+4, stop) {
				if end >= 0 {
					stop = end + 3
				}
				return hit{kind: KindHidden, rule: ruleComment, start: i, end: stop}
			}
		}
	case isLetter(c) || c == '/' && i+2 < len(t) && isLetter(t[i+2]):
		return element(t, i)
	}
	return noHit
}

// indexFrom is the index of sub in t[from:from+limit], or -1.
func indexFrom(t string, from int, sub string, limit int) int {
	end := min(len(t), from+limit)
	for j := from; j+len(sub) <= end; j++ {
		if t[j] == sub[0] && t[j:j+len(sub)] == sub {
			return j
		}
	}
	return -1
}

// markerTags are tags that mark text as instructions to a model, and are
// no HTML element; instructionTags are names other markup also uses
// (Maven's <system>), taken only around directive text.
var (
	markerTags      = []string{"important", "instructions", "instruction", "system_prompt", "system-prompt", "im_start", "user_instructions", "hidden_instructions"}
	instructionTags = []string{"system", "assistant", "sys", "admin", "secret", "hidden", "developer", "user"}
)

// hiddenStyles are the attribute texts that hide an element.
var hiddenStyles = []string{"display:none", "display: none", "visibility:hidden", "visibility: hidden", "font-size:0",
	"font-size: 0", "opacity:0", "opacity: 0", " hidden>", " hidden ", "color:transparent", "color: transparent"}

// element: a tag at t[i]. An instruction tag (<system>, <important>) or
// an element whose attributes hide it, followed within 1 KB by directive
// text, is a finding.
func element(t string, i int) hit {
	j := i + 1
	if t[j] == '/' {
		return noHit // a closing tag: its opening one was judged
	}
	ns := j
	for j < len(t) && j-ns < 24 && (isAlnum(t[j]) || t[j] == '_' || t[j] == '-') {
		j++
	}
	name := t[ns:j]
	gt := -1
	for k := j; k < len(t) && k < j+400; k++ {
		if t[k] == '>' {
			gt = k
			break
		}
		if t[k] == '<' {
			break
		}
	}
	if gt < 0 {
		return noHit
	}
	if inSet(name, markerTags) {
		return hit{kind: KindInjection, rule: ruleTag, start: i, end: gt + 1}
	}
	if inSet(name, instructionTags) {
		if directiveIn(t, gt+1, closeTag(t, gt+1, name)) {
			return hit{kind: KindInjection, rule: ruleTag, start: i, end: gt + 1}
		}
		return noHit
	}
	attrs := t[j : gt+1]
	if len(attrs) < 7 || !hiddenAttr(attrs) {
		return noHit
	}
	if directiveIn(t, gt+1, closeTag(t, gt+1, name)) {
		return hit{kind: KindHidden, rule: ruleHiddenElement, start: i, end: gt + 1}
	}
	return noHit
}

// hiddenAttr reports whether a tag's attributes hold one of hiddenStyles:
// from the first "style" or "hidden" on (none: false at once), each
// position looks only at the styles its byte can start.
func hiddenAttr(attrs string) bool {
	from := -1
	for k := 0; k+5 < len(attrs); k++ {
		if c := attrs[k] | 0x20; c == 's' && hasFoldAt(attrs, k, "style") || c == 'h' && hasFoldAt(attrs, k, "hidden") {
			from = max(k-1, 0)
			break
		}
	}
	if from < 0 {
		return false // only a style or the hidden attribute hides
	}
	for k := from; k < len(attrs); k++ {
		var cands []string
		switch attrs[k] | 0x20 {
		case 'd':
			cands = hiddenStyles[0:2]
		case 'v':
			cands = hiddenStyles[2:4]
		case 'f':
			cands = hiddenStyles[4:6]
		case 'o':
			cands = hiddenStyles[6:8]
		case ' ':
			cands = hiddenStyles[8:10]
		case 'c':
			cands = hiddenStyles[10:12]
		default:
			continue
		}
		for _, h := range cands {
			if !hasFoldAt(attrs, k, h) {
				continue
			}
			// "opacity:0.5", "font-size:0.9em" hide nothing.
			if e := k + len(h); h[len(h)-1] == '0' && e < len(attrs) && (isDigit(attrs[e]) || attrs[e] == '.') {
				continue
			}
			return true
		}
	}
	return false
}

// closeTag is where the element named name, whose content starts at
// from, ends: the index of its "</name", or from+1024 (bounded by the
// text).
func closeTag(t string, from int, name string) int {
	end := min(len(t), from+1024)
	lname := lowerASCII(name)
	for j := from; j+2+len(name) <= end; j++ {
		if t[j] == '<' && t[j+1] == '/' && foldEq(t[j+2:j+2+len(name)], lname) {
			return j
		}
	}
	return end
}

// lowerASCII is name in lower case; it allocates only when name has an
// upper-case letter.
func lowerASCII(name string) string {
	for i := 0; i < len(name); i++ {
		if isUpper(name[i]) {
			b := []byte(name)
			for k := range b {
				if isUpper(b[k]) {
					b[k] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return name
}

// bracket: "[INST]", "[/INST]", "[SYS]", "[SYSTEM]" and markdown links
// whose URL carries a placeholder for data.
func bracket(t string, i int) hit {
	for _, tok := range []string{"[INST]", "[/INST]", "[SYS]", "[/SYS]", "[SYSTEM]"} {
		if len(t)-i >= len(tok) && t[i:i+len(tok)] == tok {
			return hit{kind: KindInjection, rule: ruleTemplate, start: i, end: i + len(tok)}
		}
	}
	return markdown(t, i, false)
}

// exfilParams are query parameter names that carry data out in an
// image's URL.
var exfilParams = []string{"data", "secret", "secrets", "conversation", "chat", "history", "prompt", "password", "exfil",
	"leak", "creds", "context", "memory", "ssn", "q", "d", "info", "content", "payload", "msg", "message"}

// markdown: a markdown link (image, when image) at t[i] ('['): "[text](url)".
// An image whose URL has a query carrying a placeholder ({...}, <...>,
// $VAR), a data-named parameter or a long encoded value, or a link whose
// URL carries a placeholder, is a finding: rendering it sends the data.
func markdown(t string, i int, image bool) hit {
	close := -1
	for j := i + 1; j < len(t) && j < i+256; j++ {
		if t[j] == ']' {
			close = j
			break
		}
		if t[j] == '\n' || t[j] == '[' {
			return noHit
		}
	}
	if close < 0 || close+1 >= len(t) || t[close+1] != '(' {
		return noHit
	}
	u := close + 2
	if !hasFoldAt(t, u, "http://") && !hasFoldAt(t, u, "https://") {
		return noHit
	}
	end, q := u, -1
	for end < len(t) && end < u+4096 && t[end] != ')' && t[end] != ' ' && t[end] != '\n' {
		if t[end] == '?' && q < 0 {
			q = end
		}
		end++
	}
	if q < 0 {
		return noHit
	}
	start := i
	if image {
		start = i - 1
	}
	query := t[q+1 : end]
	kind, rule := KindExfiltration, ruleLink
	if image {
		rule = ruleImage
	}
	for k := 0; k < len(query); k++ {
		switch query[k] {
		case '{', '}', '<', '>', '$', '[':
			return hit{kind: kind, rule: rule, start: start, end: end}
		case '%':
			if hasFoldAt(query, k, "%7b") || hasFoldAt(query, k, "%3c") || hasFoldAt(query, k, "%24") {
				return hit{kind: kind, rule: rule, start: start, end: end}
			}
		}
	}
	if !image {
		return noHit
	}
	// Each parameter: a data-named one, or a value of 48 or more bytes.
	for p := 0; p < len(query); {
		e := p
		for e < len(query) && query[e] != '&' {
			e++
		}
		param := query[p:e]
		name, val := param, ""
		for k := 0; k < len(param); k++ {
			if param[k] == '=' {
				name, val = param[:k], param[k+1:]
				break
			}
		}
		if val != "" && (inSet(name, exfilParams) || len(val) >= 48) {
			return hit{kind: kind, rule: rule, start: start, end: end}
		}
		p = e + 1
	}
	return noHit
}

// --- invisible characters ---

// tagChars: a run of Unicode tag characters (U+E0000–U+E007F: F3 A0 80 xx
// and F3 A0 81 xx) that is not the tail of a flag emoji (U+1F3F4 then at
// most seven tags ending with U+E007F), or a run of two or more variation
// selectors U+E0100–U+E01EF (F3 A0 84–87 xx), which carry bytes of hidden
// text.
func tagChars(t string, i int) hit {
	if i+3 >= len(t) || t[i+1] != 0xa0 {
		return noHit
	}
	isTag := func(j int) bool {
		return j+3 < len(t) && t[j] == 0xf3 && t[j+1] == 0xa0 && (t[j+2] == 0x80 || t[j+2] == 0x81)
	}
	isVS := func(j int) bool {
		return j+3 < len(t) && t[j] == 0xf3 && t[j+1] == 0xa0 && t[j+2] >= 0x84 && t[j+2] <= 0x87
	}
	switch {
	case i >= 4 && (isTag(i-4) || isVS(i-4)):
		return noHit // inside a run already judged at its start
	case isTag(i):
		end, n := i, 0
		for isTag(end) {
			end += 4
			n++
		}
		flag := i >= 4 && t[i-4:i] == "\U0001F3F4" && n <= 7 && t[end-4:end] == "\U000E007F"
		if flag {
			return noHit
		}
		return hit{kind: KindHidden, rule: ruleTagChars, start: i, end: end}
	case isVS(i):
		end, n := i, 0
		for isVS(end) {
			end += 4
			n++
		}
		if n >= 2 {
			return hit{kind: KindHidden, rule: ruleTagChars, start: i, end: end}
		}
	}
	return noHit
}

// invisibleAt returns the length of the invisible control at t[j] (zero
// width, joiner, word joiner, byte order mark, bidi embedding, override
// and isolate, left-to-right and right-to-left marks), and whether it is
// a joiner or a mark (legitimate between letters of scripts other than
// ASCII), or 0.
func invisibleAt(t string, j int) (n int, soft bool) {
	if j+2 >= len(t) {
		return 0, false
	}
	a, b := t[j+1], t[j+2]
	switch t[j] {
	case 0xe2:
		switch {
		case a == 0x80 && b == 0x8b: // U+200B zero width space
			return 3, false
		case a == 0x80 && b >= 0x8c && b <= 0x8f: // U+200C–U+200F ZWNJ, ZWJ, LRM, RLM
			return 3, true
		case a == 0x80 && b >= 0xaa && b <= 0xae: // U+202A–U+202E bidi embeddings and overrides
			return 3, false
		case a == 0x81 && b >= 0xa0 && b <= 0xa4: // U+2060–U+2064 word joiner, invisible operators
			return 3, false
		case a == 0x81 && b >= 0xa6 && b <= 0xa9: // U+2066–U+2069 bidi isolates
			return 3, false
		}
	case 0xef:
		if a == 0xbb && b == 0xbf && j > 0 { // U+FEFF inside text, not a leading BOM
			return 3, false
		}
	}
	return 0, false
}

// invisible: a run of invisible controls inside ASCII text: the bytes
// around the run are ASCII (or the string's ends), and for a joiner or a
// directional mark, letters on both sides. Emoji sequences (ZWJ between
// emoji) and right-to-left text keep theirs.
func invisible(t string, i int) hit {
	n, soft := invisibleAt(t, i)
	if n == 0 {
		return noHit
	}
	end := i + n
	for {
		m, s := invisibleAt(t, end)
		if m == 0 {
			break
		}
		soft = soft && s
		end += m
	}
	before := i == 0 || t[i-1] < 0x80
	after := end == len(t) || t[end] < 0x80
	if !before || !after {
		return noHit
	}
	if soft && !(i > 0 && isAlnum(t[i-1]) && end < len(t) && isAlnum(t[end])) {
		return noHit
	}
	return hit{kind: KindHidden, rule: ruleInvisible, start: i, end: end}
}

// --- encoded payloads ---

// Bounds of blob decoding.
const (
	minBlob      = 40   // characters of base64 or hex
	maxBlobText  = 4096 // decoded bytes scanned
	probeDecoded = 24   // decoded bytes that must be text before a blob is decoded whole
)

// printable reports whether b is text: printable ASCII, tabs and newlines.
func printable(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return len(b) > 0
}

// blob: a base64 (standard or URL alphabet) or hex run of at least minBlob
// characters starting at the word t[ws:we], not inside a longer run. Its
// first probeDecoded bytes must decode to text; then up to maxBlobText
// bytes are decoded and scanned by the threat detectors. A threat inside
// makes the whole blob one finding of that threat's kind, rule
// "encoded-base64" or "encoded-hex".
func (s *Scanner) blob(t string, ws, we int) hit {
	if !blobLead[t[ws]] || ws > 0 && (isB64(t[ws-1]) || t[ws-1] == '-' || t[ws-1] == '_') {
		return noHit
	}
	// Hex: the word itself. Its first byte is tried before the whole
	// word is read: random hex (a hash) rarely starts with text.
	if hi, ok := HexVal(t[ws]); ok && we-ws >= minBlob && (we-ws)%2 == 0 && (hi == 2 || hi >= 3 && hi <= 7 || hi == 0) && run(t[ws:we], isHex) == we-ws {
		// Random hex (a hash) fails at once: its bytes are rarely all text.
		for k := ws; k+1 < we && k < ws+2*probeDecoded; k += 2 {
			hi, _ := HexVal(t[k])
			lo, _ := HexVal(t[k+1])
			if b := hi<<4 | lo; (b < 0x20 || b > 0x7e) && b != '\n' && b != '\r' && b != '\t' {
				return noHit
			}
		}
		n := min((we-ws)/2, maxBlobText)
		return s.decoded(t, ws, we, ruleHex, func(dst []byte) int {
			m, _ := hex.Decode(dst[:n], unsafe.Slice(unsafe.StringData(t[ws:]), 2*n))
			return m
		})
	}
	// Base64: the first four characters are decoded before the run is
	// read to its end; random base64 (a key, a hash) rarely starts with
	// text. '-' and '_' among them make it the URL alphabet; the two
	// alphabets decode their other characters alike.
	if we-ws < 4 {
		return noHit
	}
	url := false
	for k := ws; k < ws+4; k++ {
		url = url || t[k] == '-' || t[k] == '_'
	}
	enc := base64.RawStdEncoding
	if url {
		enc = base64.RawURLEncoding
	}
	var probe [probeDecoded + 3]byte
	if _, err := enc.Decode(probe[:3], unsafe.Slice(unsafe.StringData(t[ws:]), 4)); err != nil || !printable(probe[:3]) {
		return noHit
	}
	end := ws
	for end < len(t) && (isB64(t[end]) || t[end] == '-' || t[end] == '_') {
		url = url || t[end] == '-' || t[end] == '_'
		end++
	}
	body := end
	for end < len(t) && end-body < 2 && t[end] == '=' {
		end++
	}
	if body-ws < minBlob {
		return noHit
	}
	if url {
		enc = base64.RawURLEncoding
	}
	chars := probeDecoded / 3 * 4
	if _, err := enc.Decode(probe[:], unsafe.Slice(unsafe.StringData(t[ws:]), chars)); err != nil || !printable(probe[:probeDecoded]) {
		return noHit
	}
	chars = min(body-ws, maxBlobText/3*4)
	chars -= chars % 4
	return s.decoded(t, ws, end, ruleBase64, func(dst []byte) int {
		m, _ := enc.Decode(dst, unsafe.Slice(unsafe.StringData(t[ws:]), chars))
		return m
	})
}

// blobLead marks the bytes a blob that decodes to text may start with:
// a hex digit whose value is 0 or 2 to 7 (the high nibble of a tab, a
// newline or printable ASCII), or a base64 character, of either alphabet,
// whose value is 2, 3 or 8 to 31 (the high six bits of one).
var blobLead = func() (t [256]bool) {
	for c := range 256 {
		if hi, ok := HexVal(byte(c)); ok && c <= '9' && (hi == 0 || hi >= 2 && hi <= 7) {
			t[c] = true
		}
	}
	const std = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for v := range 32 {
		if v == 2 || v == 3 || v >= 8 {
			t[std[v]] = true // the two alphabets differ only at 62 and 63
		}
	}
	return t
}()

// decoded decodes a blob with dec into a pooled buffer and scans it.
func (s *Scanner) decoded(t string, ws, end int, rule string, dec func(dst []byte) int) hit {
	bp, _ := s.bufs.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, maxBlobText+4)
		bp = &b
	}
	n := dec(*bp)
	txt := unsafe.String(unsafe.SliceData(*bp), n) // read only, during this call
	h := s.threatsOnly(txt)
	s.bufs.Put(bp)
	if h.start < 0 {
		return noHit
	}
	return hit{kind: h.kind, rule: rule, start: ws, end: end}
}
