package scan

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nyaruka/phonenumbers"
	"google.golang.org/protobuf/proto"
)

// Phone numbers are found in two steps. phone reads a candidate with
// byte loops only: digits in groups split by single separators, an area
// code in parentheses, an extension; it drops what cannot be a number
// (too few or too many digits, a date, a group of one digit inside, a run
// in a list of numbers) without allocating. A candidate is then checked
// against libphonenumber's metadata (github.com/nyaruka/phonenumbers).
// One written with '+' needs a known country code and a length that
// country uses. One written without needs, in one of the scanner's
// regions, a length and the general pattern of the region (a compiled
// regexp, no allocation), then the library's IsValidNumberForRegion
// (each number type's pattern) and the grouping of the library's national
// format.

// DefaultPhoneRegions are the regions (CLDR codes) whose national formats
// (a number without '+') the scanner takes when Options.PhoneRegions is
// empty: the 30 most populous countries (UN, 2024), then Canada and the
// European and Pacific countries whose national formats are common in
// customer data. A number written with '+' and its country code is taken
// for every country whatever this list holds.
var DefaultPhoneRegions = []string{
	"US", "IN", "CN", "ID", "PK", "NG", "BR", "BD", "RU", "ET", "MX", "JP", "EG", "PH", "CD",
	"VN", "IR", "TR", "DE", "TH", "TZ", "GB", "FR", "ZA", "IT", "KE", "MM", "CO", "KR", "SD",
	"CA", "ES", "AR", "PL", "UA", "NL", "BE", "SE", "CH", "AT", "PT", "IE", "AU", "NZ",
}

// phoneRegion is what the scanner keeps of one region's metadata.
type phoneRegion struct {
	id      string
	cc      int32
	prefix  string         // the national (trunk) prefix, "" for none
	lengths uint32         // bit n: a national significant number may have n digits
	general *regexp.Regexp // the region's general pattern, anchored
	// shapes are the groups the region's national formats print, when
	// every format could be read; nil: any grouping may be one.
	shapes []phoneShape
}

// phoneShape is the groups of digits one national format prints: the
// least and most digits of each group.
type phoneShape struct {
	n        int
	min, max [8]uint8
}

// readShape reads a format's pattern ("(\d{3})(\d{2,3})(\d)") and its
// format ("$1 $2-$3", adjacent groups joined) into a shape; ok is false
// for anything else.
func readShape(pattern, format string) (sh phoneShape, ok bool) {
	var gmin, gmax [8]int
	ng := 0
	for i := 0; i < len(pattern); {
		if pattern[i] != '(' || ng == len(gmin) {
			return sh, false
		}
		j := strings.IndexByte(pattern[i:], ')')
		if j < 0 {
			return sh, false
		}
		body := pattern[i+1 : i+j]
		i += j + 1
		if !strings.HasPrefix(body, `\d`) {
			return sh, false
		}
		q := body[2:]
		lo, hi := 1, 1
		if q != "" {
			if q[0] != '{' || q[len(q)-1] != '}' {
				return sh, false
			}
			a, b, two := strings.Cut(q[1:len(q)-1], ",")
			var err1, err2 error
			lo, err1 = strconv.Atoi(a)
			hi, err2 = lo, nil
			if two {
				hi, err2 = strconv.Atoi(b)
			}
			if err1 != nil || err2 != nil || hi < lo || hi > 20 {
				return sh, false
			}
		}
		gmin[ng], gmax[ng] = lo, hi
		ng++
	}
	// The format: "$k" in order; two with nothing between are one group.
	k, prevDollar := 0, false
	for i := 0; i < len(format); i++ {
		if format[i] != '$' || i+1 >= len(format) || format[i+1] != byte('1'+k) {
			prevDollar = false
			continue
		}
		if prevDollar && sh.n > 0 {
			sh.min[sh.n-1] += uint8(gmin[k])
			sh.max[sh.n-1] += uint8(gmax[k])
		} else {
			sh.min[sh.n], sh.max[sh.n] = uint8(gmin[k]), uint8(gmax[k])
			sh.n++
		}
		k++
		i++
		prevDollar = i+1 < len(format) && format[i+1] == '$'
	}
	return sh, k == ng && ng > 0
}

// shaped reports whether c's groups may be one of r's national formats:
// as many groups (or one more, the national prefix apart), each of a
// length the format prints, the first perhaps with the national prefix
// (trunk digits) or in parentheses. It is a cheap filter before the
// library; groupedAs is the verdict.
func (r *phoneRegion) shaped(c *phoneCand, trunk int) bool {
	if r.shapes == nil {
		return true
	}
	g := c.groups[:c.ng]
	if trunk > 0 && len(g) > 1 && int(g[0]) == trunk {
		g = g[1:]
		trunk = 0
	}
	for _, sh := range r.shapes {
		if sh.n != len(g) {
			continue
		}
		ok := true
		for k := range g {
			w := int(g[k])
			if k == 0 {
				w -= trunk
				if w < int(sh.min[0]) && w+trunk >= int(sh.min[0]) {
					w += trunk
				}
			}
			if w < int(sh.min[k]) || w > int(sh.max[k]) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// phoneMeta is the library's metadata as the scanner reads it.
type phoneMeta struct {
	regions map[string]*phoneRegion
	byCC    [1000][]*phoneRegion
}

// loadPhoneMeta reads the library's metadata once per process.
var loadPhoneMeta = sync.OnceValue(func() *phoneMeta {
	m := &phoneMeta{regions: map[string]*phoneRegion{}}
	coll, err := phonenumbers.MetadataCollection()
	if err != nil {
		panic("scan: phone metadata: " + err.Error()) // the library's embedded data; not reached
	}
	for _, md := range coll.GetMetadata() {
		gd := md.GetGeneralDesc()
		r := &phoneRegion{id: md.GetId(), cc: md.GetCountryCode(), prefix: md.GetNationalPrefix()}
		for _, n := range gd.GetPossibleLength() {
			if n > 0 && n < 32 {
				r.lengths |= 1 << n
			}
		}
		re, err := regexp.Compile("^(?:" + gd.GetNationalNumberPattern() + ")$")
		if err != nil || r.cc <= 0 || r.cc >= 1000 {
			continue
		}
		r.general = re
		for _, f := range md.GetNumberFormat() {
			sh, ok := readShape(f.GetPattern(), f.GetFormat())
			if !ok {
				r.shapes = nil
				break
			}
			r.shapes = append(r.shapes, sh)
		}
		if r.id != "001" {
			m.regions[r.id] = r
		}
		m.byCC[r.cc] = append(m.byCC[r.cc], r)
	}
	return m
})

// phoneRegions returns the metadata of the regions named, in order,
// leaving out unknown names. A region of the North American plan brings
// the plan's other regions after the list: they share its formats, and a
// Caribbean area code ("(242) 322-2823") is written as a US one.
func phoneRegions(ids []string) []*phoneRegion {
	m := loadPhoneMeta()
	out := make([]*phoneRegion, 0, len(ids))
	nanp := false
	for _, id := range ids {
		if r := m.regions[id]; r != nil && !slices.Contains(out, r) {
			out = append(out, r)
			nanp = nanp || r.cc == 1
		}
	}
	if nanp {
		for _, r := range m.byCC[1] {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// phoneLibBudget is the number of times one Scan (or Redact) asks the
// library about a phone candidate. Each costs some microseconds and
// allocations; past the budget, a candidate that has a region's length and
// matches its general pattern is taken without the library's type
// patterns and grouping check, so that a document full of numbers costs
// a bounded time.
const phoneLibBudget = 128

// maxPhoneDigits bounds a candidate: E.164 has at most 15 digits, and a
// national number written with its trunk prefix one or two more.
const maxPhoneDigits = 17

// phoneCand is a candidate read by phone.
type phoneCand struct {
	d     [maxPhoneDigits]byte
	n     int  // digits in d
	plus  bool // written with '+'
	paren bool // the first group (after a country code) in parentheses
	end   int  // the end of the number, extension included
	// groups are the lengths of the groups of digits as written, a
	// parenthesized one included, "(0)" left out.
	groups [maxPhoneDigits]uint8
	ng     int
}

// addGroup notes a group of n digits.
func (c *phoneCand) addGroup(n int) {
	if c.ng < len(c.groups) {
		c.groups[c.ng] = uint8(n)
		c.ng++
	}
}

// phone: a phone number at t[i], '+', '(' or a digit at a number's
// start, in the format the library knows for its country: international
// ("+46 (0)8 928 571 38", "+1-903-140-4508x769") for every country, or
// national ("0489 25 37 29", "(08) 8747 6301", "01.84.17.61.18",
// "415-555-0134") in one of the scanner's regions.
func (s *Scanner) phone(t string, i int, lib *int) hit {
	var rc phoneCand
	if !readPhone(t, i, &rc) {
		return noHit
	}
	if rc.plus {
		if !validInternational(&rc) {
			return noHit
		}
		return hit{kind: KindPhone, rule: "phone-e164", start: i, end: rc.end}
	}
	// The national checks hand the digits to regexp and the library: a
	// copy on the heap, so that rc, read for every candidate, stays on
	// the stack.
	c := new(phoneCand)
	*c = rc
	r := s.validNational(c, lib)
	if r == nil {
		return noHit
	}
	rule := "phone-national"
	if r.cc == 1 {
		rule = "phone-nanp" // the id of North American numbers before issue 32
	}
	return hit{kind: KindPhone, rule: rule, start: i, end: c.end}
}

// isPhoneSep reports whether c may split the groups of a phone number.
func isPhoneSep(c byte) bool { return c == ' ' || c == '-' || c == '.' || c == '/' }

// readPhone reads the candidate at t[i] into c and reports whether it has
// a phone number's shape: groups of digits split by single separators
// (spaces and dashes may mix, dots and slashes may not), an area code in
// parentheses, "(0)" after a country code, 7 to 17 digits, in a national
// number no inner group of one digit (notNational says what else is
// dropped), not after a sign, a hex byte or '[', not in a list of numbers
// or before ':', then perhaps an extension ("x769", " ext. 12", "#12").
func readPhone(t string, i int, c *phoneCand) bool {
	j := i
	if t[j] == '+' {
		c.plus = true
		j++
		if j >= len(t) || t[j] < '1' || t[j] > '9' {
			return false
		}
	}
	if i >= 2 && (t[i-1] == ' ' || t[i-1] == ':') && isDigit(t[i-2]) || !c.plus && i >= 1 && (isDigit(t[i-1]) || t[i-1] == '+' || t[i-1] == '-') {
		// The number goes on before it (a list of numbers, a time's
		// seconds, a MAC address), or it has a sign (a time zone's
		// offset, "-0800 2009").
		return false
	}
	if !c.plus && i >= 1 && t[i-1] == '[' {
		return false // a list: "[239 191 189]"
	}
	if i >= 3 && (t[i-1] == ' ' || t[i-1] == ':') && isHex(t[i-2]) && isHex(t[i-3]) && (i == 3 || !isLetter(t[i-4])) {
		// A hex byte before it: a hex dump ("4b 03 04 14 00 00"), a
		// device number ("fc:01 787766").
		return false
	}
	sep := byte(0)
	groups, end := 0, -1
	for j < len(t) {
		switch b := t[j]; {
		case b == '(':
			// An area code in parentheses: the first group of a national
			// number, the group after a country code, or "(0)" there.
			k := j + 1 + runMax(t[j+1:], isDigit, 6)
			if k >= len(t) || t[k] != ')' || k == j+1 || groups > 1 || groups == 1 && !c.plus && c.n != 1 || c.paren {
				return false
			}
			if !(c.plus && k == j+2 && t[j+1] == '0') {
				if c.n+k-j-1 > len(c.d) {
					return false
				}
				c.n += copy(c.d[c.n:], t[j+1:k])
				c.addGroup(k - j - 1)
			}
			c.paren = true
			groups++
			sep = 0 // the groups after an area code have their own separator
			j = k + 1
			end = j
			if j < len(t) && (t[j] == ' ' || t[j] == '-') && j+1 < len(t) && (isDigit(t[j+1]) || t[j+1] == '(') {
				j++
			}
			continue
		case isDigit(b):
			k := j + runMax(t[j:], isDigit, len(c.d)+1)
			if c.n+k-j > len(c.d) {
				return false
			}
			if k-j == 1 && groups > 0 && !c.plus && k < len(t) && isPhoneSep(t[k]) && k+1 < len(t) && isDigit(t[k+1]) {
				return false // "978-3-16-148410-0", "1 2 3"
			}
			c.n += copy(c.d[c.n:], t[j:k])
			c.addGroup(k - j)
			groups++
			j = k
			end = j
			if j+1 < len(t) && isPhoneSep(t[j]) && (isDigit(t[j+1]) || t[j+1] == '(') {
				switch {
				case c.plus && groups == 1, sep == 0:
					// After a country code any separator may come first.
					if !(c.plus && groups == 1) {
						sep = t[j]
					}
				case t[j] != sep && !((t[j] == ' ' || t[j] == '-') && (sep == ' ' || sep == '-')):
					return false
				}
				j++
				continue
			}
		}
		break
	}
	if end < 0 || c.n < 7 {
		return false
	}
	if end < len(t) && t[end] == ':' {
		return false // a time, "2006-002 15:04:05"
	}
	c.end = phoneExt(t, end)
	if c.end == end && (!numberEnds(t, end) || end+1 < len(t) && (t[end] == '.' || t[end] == '-') && isAlnum(t[end+1])) {
		return false
	}
	if !c.plus && !c.paren && notNational(t, i, c, sep) {
		return false
	}
	if end+1 < len(t) && t[end] == ' ' && isDigit(t[end+1]) {
		return false // a list of numbers
	}
	return true
}

// notNational reports whether c, read at t[i] without '+' or an area code
// in parentheses, is not written as a national number is: a bare run of
// digits (an id), two groups split by anything but a space ("2024-000123",
// "1234.5678", "8080-8090") unless a trunk '0' and 9 digits or more make
// it a national number ("01812-345678"), a last group of one digit (an ISBN's check
// digit), four dotted groups of at most three digits (an IPv4 address),
// or a date.
func notNational(t string, i int, c *phoneCand, sep byte) bool {
	if sep == 0 || c.ng == 2 && sep != ' ' && !(c.d[0] == '0' && c.n >= 9) || c.groups[c.ng-1] == 1 {
		return true
	}
	if sep == '.' && c.ng == 4 && c.groups[0] <= 3 && c.groups[1] <= 3 && c.groups[2] <= 3 && c.groups[3] <= 3 {
		return true
	}
	return date(t, i) >= 0
}

// phoneExt returns the end of the extension that follows a number ending
// at t[e] ("x769", " x 769", " ext. 12", ";ext=12", "#12"), or e.
func phoneExt(t string, e int) int {
	j := e
	if j < len(t) && t[j] == ' ' {
		j++
	}
	switch {
	case j < len(t) && (t[j] == 'x' || t[j] == 'X' || t[j] == '#'):
		j++
	case j+3 <= len(t) && (t[j:j+3] == "ext" || t[j:j+3] == "Ext" || t[j:j+3] == "EXT"):
		j += 3
		if j < len(t) && (t[j] == '.' || t[j] == '=') {
			j++
		}
	case j+4 <= len(t) && t[j:j+4] == ";ext":
		j += 4
		if j < len(t) && t[j] == '=' {
			j++
		}
	default:
		return e
	}
	if j < len(t) && t[j] == ' ' {
		j++
	}
	n := runMax(t[j:], isDigit, 8)
	if n == 0 || n > 7 || !numberEnds(t, j+n) {
		return e
	}
	return j + n
}

// validInternational reports whether c, written with '+', is a number
// the library deems possible: a known country code followed by a national
// significant number of a length that country uses. A '+' and a country
// code say "phone number" by themselves; a number no operator has been
// given ("+1-903-140-4508", exchange 140) is taken too.
func validInternational(c *phoneCand) bool {
	m := loadPhoneMeta()
	cc := 0
	for k := 0; k < 3 && k < c.n; k++ {
		cc = cc*10 + int(c.d[k]-'0')
		for _, r := range m.byCC[cc] {
			if r.lengths&(1<<(c.n-k-1)) != 0 {
				return true
			}
		}
	}
	return false
}

// validNational returns the first of the scanner's regions (nil: none)
// that c, written without '+', is a valid number of, written as that region writes its
// numbers: its national prefix (the trunk '0' of most countries, '8' in
// Russia) where the region's national format has it, and its groups of
// digits as that format groups them.
func (s *Scanner) validNational(c *phoneCand, lib *int) *phoneRegion {
	d := c.d[:c.n]
	for _, r := range s.phoneRegions() {
		nsn := d
		if r.prefix != "" && len(d) > len(r.prefix) && string(d[:len(r.prefix)]) == r.prefix {
			nsn = d[len(r.prefix):]
		}
		if r.lengths&(1<<len(nsn)) == 0 || !r.shaped(c, len(d)-len(nsn)) || !r.general.Match(nsn) {
			continue
		}
		if *lib <= 0 {
			// The budget is spent: the region's pattern and lengths
			// decide.
			return r
		}
		*lib--
		if num := libValid(r.cc, r.id, nsn); num != nil && c.groupedAs(phonenumbers.Format(num, phonenumbers.NATIONAL), len(d)-len(nsn)) {
			return r
		}
	}
	return nil
}

// groupedAs reports whether c's digits are grouped as in f, the library's
// national format of the number, whose written national prefix has
// trunk digits: the same groups, the prefix perhaps written in the first
// group where f leaves it out. "979-89-0768" is valid in Spain, where
// numbers are written "979 89 07 68": it is not taken.
func (c *phoneCand) groupedAs(f string, trunk int) bool {
	g := 0
	for i := 0; i < len(f); {
		n := run(f[i:], isDigit)
		if n == 0 {
			i++
			continue
		}
		if g >= c.ng {
			return false
		}
		w := int(c.groups[g])
		if w != n && !(g == 0 && w == n+trunk) {
			return false
		}
		g++
		i += n
	}
	return g == c.ng
}

// libValid asks the library whether nsn, a national significant number
// of country code cc, is a valid number of region id. It allocates: it
// runs only for a candidate that passed every cheaper check. It returns
// the number when valid, nil when not.
func libValid(cc int32, id string, nsn []byte) *phonenumbers.PhoneNumber {
	var v uint64
	zeros := 0
	for _, b := range nsn {
		if v == 0 && b == '0' {
			zeros++
		}
		v = v*10 + uint64(b-'0')
	}
	num := &phonenumbers.PhoneNumber{CountryCode: proto.Int32(cc), NationalNumber: proto.Uint64(v)}
	if zeros > 0 {
		num.ItalianLeadingZero = proto.Bool(true)
		num.NumberOfLeadingZeros = proto.Int32(int32(zeros))
	}
	if phonenumbers.IsValidNumberForRegion(num, id) {
		return num
	}
	return nil
}
