package scan

import "strings"

// card: a payment card number at t[i]: 12 to 19 digits, in one group or
// in groups of 3 to 9 (the first of 4; after three groups of 4, the last
// may have 1 or 2: "6740 8920 3912 9") split by one kind of separator
// (single spaces, dashes or dots), in an issuer's range and of a length
// that issuer uses (iins), passing the Luhn check, not touching a letter
// or another digit, not after a minus sign, and not a field of a
// colon-separated name (an AWS
// account id in "arn:aws:iam::123456789012:role/x"), nor, unseparated, an
// item of a list of big integers (bigNumberList). The longest such run
// of groups wins, so "4111 1111 1111 1111 2029" is a card and a year.
func card(t string, i int) hit {
	if i+4 > len(t) || !iinPrefix(t[i:i+4]) {
		return noHit // "2026-11-30", "1732000000000": no issuer's
	}
	var groups [8][2]int
	var digits [19]byte
	ng, nd := 0, 0
	sep := byte(0)
	j := i
	for ng < len(groups) {
		k := j + runMax(t[j:], isDigit, 20)
		if nd+k-j > len(digits) {
			break
		}
		nd += copy(digits[nd:], t[j:k])
		groups[ng] = [2]int{j, k}
		ng++
		if k+1 < len(t) && (t[k] == ' ' || t[k] == '-' || t[k] == '.') && isDigit(t[k+1]) && (sep == 0 || t[k] == sep) {
			sep = t[k]
			j = k + 1
			continue
		}
		break
	}
	if ng == 0 || i > 0 && t[i-1] == '-' || midGroups(t, i) {
		// A negative number is no card, nor the tail of a longer run of
		// groups ("1234 5678 9012 3456": not 5678 9012 3456).
		return noHit
	}
	if ng > 1 {
		if groups[0][1]-groups[0][0] != 4 {
			return noHit
		}
	}
	total := 0
	best := -1
	fours := true // every group so far has 4 digits
	for b := 0; b < ng; b++ {
		n := groups[b][1] - groups[b][0]
		if b > 0 && (n > 9 || n < 3 && !(fours && b >= 3)) {
			break
		}
		fours = fours && n == 4
		total += n
		if total >= 12 && numberEnds(t, groups[b][1]) && !(b+1 < ng && sep != ' ') &&
			issuer(digits[:total]) && luhn(digits[:total]) {
			best = b
		}
	}
	if best < 0 {
		return noHit
	}
	if e := groups[best][1]; e+1 < len(t) && t[e] == ':' && isAlnum(t[e+1]) || best == 0 && bigNumberList(t, i, groups[0][1]) {
		return noHit
	}
	return hit{kind: KindCard, rule: "card-luhn", start: i, end: groups[best][1]}
}

// midGroups reports whether t[i] follows a group of four digits and a
// separator: the number is the rest of a run of groups that started
// before it.
func midGroups(t string, i int) bool {
	return i >= 5 && (t[i-1] == ' ' || t[i-1] == '-' || t[i-1] == '.') && run(t[i-5:i-1], isDigit) == 4 && (i == 5 || !isDigit(t[i-6]))
}

// bigNumberList reports whether the run of digits t[i:e] is an item of a
// comma-separated list of big integers (random seeds, constants in code):
// a neighbour item has 10 digits or more. A card number beside short
// items ("4111111111111111,12/29,123") is not such a list.
func bigNumberList(t string, i, e int) bool {
	j := e
	if j < len(t) && t[j] == ',' {
		j++
		if j < len(t) && t[j] == ' ' {
			j++
		}
		if j < len(t) && t[j] == '-' {
			j++
		}
		if runMax(t[j:], isDigit, 10) == 10 {
			return true
		}
	}
	j = i
	if j > 0 && t[j-1] == '-' {
		j--
	}
	if j > 0 && t[j-1] == ' ' {
		j--
	}
	if j == 0 || t[j-1] != ',' {
		return false
	}
	n := 0
	for k := j - 2; k >= 0 && isDigit(t[k]) && n < 10; k-- {
		n++
	}
	return n >= 10
}

// iin is one range of issuer identification numbers: the first digits
// of a card number from lo to hi, and the lengths (bit n: n digits) the
// network issues in it.
type iin struct {
	lo, hi  uint32
	digits  int
	lengths uint32
}

func lens(from, to int) uint32 { return 1<<(to+1) - 1<<from }

// iins are the ranges the card networks publish (their own rules, and
// the ranges the npm package credit-card-type 10.3 lists by brand): Visa,
// Mastercard, American Express, Diners Club, Discover, JCB, UnionPay,
// Maestro, Mir, RuPay, Troy, Elo, Verve, Hipercard, Dankort. Ranges
// inside a wider one (Elo's and Verve's 50 and 65, RuPay's 60 and 65,
// Troy's 65) are covered by it. UATP (1, 15 digits) is left out: it is
// an airline's card and 15-digit ids starting with 1 are common.
var iins = []iin{
	{4, 4, 1, 1<<13 | 1<<16 | 1<<18 | 1<<19}, // Visa
	{493698, 493698, 6, lens(12, 19)},        // Maestro
	{51, 55, 2, 1 << 16},                     // Mastercard
	{2221, 2720, 4, 1 << 16},                 // Mastercard
	{2200, 2204, 4, lens(16, 19)},            // Mir
	{34, 34, 2, 1 << 15},                     // American Express
	{37, 37, 2, 1 << 15},                     // American Express
	{300, 305, 3, lens(14, 19)},              // Diners Club
	{3095, 3095, 4, lens(14, 19)},            // Diners Club
	{36, 36, 2, lens(14, 19)},                // Diners Club
	{38, 39, 2, lens(14, 19)},                // Diners Club
	{3528, 3589, 4, lens(16, 19)},            // JCB, RuPay's 353 and 356
	{1800, 1800, 4, lens(15, 19)},            // JCB
	{2131, 2131, 4, lens(15, 19)},            // JCB
	{50, 50, 2, lens(12, 19)},                // Maestro, Dankort, Verve, Elo, RuPay
	{56, 69, 2, lens(12, 19)},                // Maestro; Discover, UnionPay, RuPay, Elo, Troy, Hipercard, Verve (12-19 covers them)
	{810, 810, 3, lens(14, 19)},              // UnionPay
	{8110, 8171, 4, lens(14, 19)},            // UnionPay
	{82, 82, 2, 1 << 16},                     // RuPay
	{9792, 9792, 4, 1 << 16},                 // Troy
}

// iinStarts has bit p set when a card number may start with the four
// digits of p: p's first digits are in a range of iins.
var iinStarts = func() (b [10000/64 + 1]uint64) {
	for p := range 10000 {
		for _, r := range iins {
			v, d := uint32(p), 4
			for ; d > r.digits; d-- {
				v /= 10
			}
			// A range of more than four digits (Maestro's 493698) is
			// taken on its first four.
			lo, hi := r.lo, r.hi
			for k := r.digits; k > d; k-- {
				lo, hi = lo/10, hi/10
			}
			if v >= lo && v <= hi {
				b[p/64] |= 1 << (p % 64)
				break
			}
		}
	}
	return b
}()

// iinPrefix reports whether a card number may start with the four digits
// d (iinStarts).
func iinPrefix(d string) bool {
	p := 0
	for k := range 4 {
		if !isDigit(d[k]) {
			return false
		}
		p = p*10 + int(d[k]-'0')
	}
	return iinStarts[p/64]&(1<<(p%64)) != 0
}

// issuer reports whether d, the digits of a card number, start in a
// network's range (iins) and have a length that network issues.
func issuer(d []byte) bool {
	bit := uint32(1) << len(d)
	for _, r := range iins {
		if r.lengths&bit == 0 || len(d) < r.digits {
			continue
		}
		v := uint32(0)
		for _, c := range d[:r.digits] {
			v = v*10 + uint32(c-'0')
		}
		if v >= r.lo && v <= r.hi {
			return true
		}
	}
	return false
}

func luhn(d []byte) bool {
	sum := 0
	for i := range d {
		n := int(d[len(d)-1-i] - '0')
		if i%2 == 1 {
			n *= 2
			if n > 9 {
				n -= 9
			}
		}
		sum += n
	}
	return sum%10 == 0
}

// ssnWords make 9 bare digits an SSN.
var ssnWords = []string{"ssn", "social security", "socialsecurity", "ss#", "soc sec", "tax id", "taxpayer"}

// ssnKeyWords are ssnWords looked for in a member's key (only those made
// of letters can be found there); ssnKeys and dobKeys are the words of a
// key that make 9 digits an SSN and a date a date of birth.
var (
	ssnKeyWords = newKeyWords(ssnWords...)
	ssnKeys     = newKeyWords("ssn", "socialsecurity")
	dobKeys     = newKeyWords("dob", "birth", "born")
)

// ssn: a US social security number at t[i]: NNN-NN-NNNN or NNN NN NNNN
// (one kind of separator), or 9 bare digits after a word such as "ssn" or
// "social security" (within 32 bytes, or in the member's name); never
// area 000, 666 or 900-999, group 00 or serial 0000.
func ssn(t string, i int, member []byte) hit {
	if len(t)-i < 9 {
		return noHit
	}
	if i+11 <= len(t) && (t[i+3] == '-' || t[i+3] == ' ') && t[i+6] == t[i+3] &&
		run(t[i:i+3], isDigit) == 3 && run(t[i+4:i+6], isDigit) == 2 && run(t[i+7:i+11], isDigit) == 4 &&
		numberEnds(t, i+11) && !spacedRun(t, i, i+11, t[i+3]) && validSSN(t[i:i+3], t[i+4:i+6], t[i+7:i+11]) {
		return hit{kind: KindSSN, rule: "ssn", start: i, end: i + 11}
	}
	if runMax(t[i:], isDigit, 10) == 9 && numberEnds(t, i+9) && validSSN(t[i:i+3], t[i+3:i+5], t[i+5:i+9]) &&
		(contextBefore(t, i, 32, ssnWords) || ssnKeys.inKey(member)) {
		return hit{kind: KindSSN, rule: "ssn-bare", start: i, end: i + 9}
	}
	return noHit
}

// spacedRun reports whether t[start:end], groups of digits split by
// spaces (sep), is part of a longer such run: a digit group just before
// or after it ("834 67 1040 46" is a list of numbers).
func spacedRun(t string, start, end int, sep byte) bool {
	if sep != ' ' {
		return false
	}
	return start >= 2 && t[start-1] == ' ' && isDigit(t[start-2]) || end+1 < len(t) && t[end] == ' ' && isDigit(t[end+1])
}

func validSSN(area, group, serial string) bool {
	return area != "000" && area != "666" && area[0] != '9' && group != "00" && serial != "0000"
}

// dobWords make a date a date of birth.
var dobWords = []string{"dob", "d.o.b", "born", "birth", "geb."}

// dob: a date of birth at t[i]: a date (YYYY-MM-DD, YYYY/MM/DD,
// MM/DD/YYYY, DD/MM/YYYY, DD.MM.YYYY, MM-DD-YYYY, one kind of separator,
// a year from 1900 to 2099) after "dob", "born" or "birth" (within 40
// bytes, or in the member's name).
func dob(t string, i int, member []byte) hit {
	end := date(t, i)
	if end < 0 || !(contextBefore(t, i, 40, dobWords) || dobKeys.inKey(member)) {
		return noHit
	}
	return hit{kind: KindDOB, rule: "dob", start: i, end: end}
}

// isDateSep reports whether c may split a date's parts.
func isDateSep(c byte) bool { return c == '-' || c == '/' || c == '.' }

// date returns the end of a valid date at t[i], or -1.
func date(t string, i int) int {
	num := func(j, n int) int {
		if j+n > len(t) || run(t[j:j+n], isDigit) != n {
			return -1
		}
		v := 0
		for _, c := range []byte(t[j : j+n]) {
			v = v*10 + int(c-'0')
		}
		return v
	}
	if i+10 > len(t) || !numberEnds(t, i+10) {
		return -1
	}
	okYear := func(y int) bool { return y >= 1900 && y <= 2099 }
	okMD := func(m, d int) bool { return m >= 1 && m <= 12 && d >= 1 && d <= 31 }
	if y := num(i, 4); y >= 0 && isDateSep(t[i+4]) && t[i+7] == t[i+4] {
		if okYear(y) && okMD(num(i+5, 2), num(i+8, 2)) {
			return i + 10
		}
		return -1
	}
	a, b := num(i, 2), num(i+3, 2)
	if a < 0 || b < 0 || !isDateSep(t[i+2]) || t[i+5] != t[i+2] || !okYear(num(i+6, 4)) {
		return -1
	}
	if okMD(a, b) || okMD(b, a) {
		return i + 10
	}
	return -1
}

// ibanLen is the registered length of each country's IBAN, by its ISO
// 3166 code (SWIFT's IBAN registry).
var ibanLen = func() (t [26 * 26]uint8) {
	for _, e := range strings.Fields(`AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BI27 BR29 BY28 CH21
		CR22 CY28 CZ24 DE22 DJ27 DK18 DO28 EE20 EG29 ES24 FI18 FK18 FO18 FR27 GB22 GE22 GI23 GL18
		GR27 GT28 HN28 HR21 HU28 IE22 IL23 IQ23 IS26 IT27 JO30 KW30 KZ20 LB28 LC32 LI21 LT20 LU20
		LV21 LY25 MC27 MD24 ME22 MK19 MN20 MR27 MT31 MU30 NI28 NL18 NO15 OM23 PK24 PL28 PS29 PT25
		QA29 RO24 RS22 RU33 SA24 SC31 SD18 SE24 SI19 SK24 SM27 SO23 ST25 SV28 TL23 TN24 TR26 UA29
		VA22 VG24 XK20 YE30`) {
		t[int(e[0]-'A')*26+int(e[1]-'A')] = (e[2]-'0')*10 + e[3] - '0'
	}
	return t
}()

// iban: an IBAN at t[i]: a country code, two check digits and the
// account (upper-case letters and digits), of the country's registered
// length, written in one piece or in groups of four split by single
// spaces, passing the mod-97 check.
func iban(t string, i int) hit {
	if i+4 > len(t) || !isUpper(t[i+1]) || !isDigit(t[i+2]) || !isDigit(t[i+3]) {
		return noHit
	}
	want := int(ibanLen[int(t[i]-'A')*26+int(t[i+1]-'A')])
	if want == 0 {
		return noHit
	}
	var buf [34]byte
	n, j := 0, i
	spaced := false
	for j < len(t) && n < want {
		c := t[j]
		if isUpperDigit(c) {
			buf[n] = c
			n++
			j++
			continue
		}
		if c != ' ' || n%4 != 0 || j+1 >= len(t) || !isUpperDigit(t[j+1]) || n > 4 && !spaced {
			return noHit
		}
		spaced = true
		j++
	}
	if n != want || j < len(t) && isAlnum(t[j]) {
		return noHit
	}
	rem := 0
	for k := range want {
		c := buf[(k+4)%want]
		if isDigit(c) {
			rem = (rem*10 + int(c-'0')) % 97
		} else {
			rem = (rem*100 + int(c-'A') + 10) % 97
		}
	}
	if rem != 1 {
		return noHit
	}
	return hit{kind: KindIBAN, rule: "iban", start: i, end: j}
}

func isLocalByte(c byte) bool {
	return isAlnum(c) || c == '.' || c == '_' || c == '%' || c == '+' || c == '-'
}

func isDomainByte(c byte) bool { return isAlnum(c) || c == '-' || c == '.' }

// fileTLDs are file extensions that end "name@2x.png"-like text, not
// domains.
var fileTLDs = []string{"png", "jpg", "jpeg", "gif", "svg", "webp", "ico", "js", "ts", "css", "map", "json", "txt", "md", "html", "py", "go", "rb", "java", "tgz", "zip"}

// email: an address around t[at], '@': a local part of letters, digits
// and ._%+- (not starting or ending with '.', at most 64 bytes, not
// reaching back before floor), a domain of two labels or more, each of
// letters, digits and inner dashes, the last (the TLD) of 2 to 24 letters
// or "xn--", and not a file extension ("icon@2x.png"). A final dot is
// not part of it.
func email(t string, at, floor int) hit {
	s := at
	for s > floor && at-s < 65 && isLocalByte(t[s-1]) {
		s--
	}
	if s == at || at-s > 64 || s > 0 && isLocalByte(t[s-1]) || t[s] == '.' || t[at-1] == '.' || s > 0 && t[s-1] == '@' {
		return noHit
	}
	e := at + 1
	for e < len(t) && e-at <= 254 && isDomainByte(t[e]) {
		e++
	}
	for e > at+1 && (t[e-1] == '.' || t[e-1] == '-') {
		e--
	}
	dom := t[at+1 : e]
	if len(dom) < 4 || len(dom) > 253 || e < len(t) && (t[e] == '@' || t[e] == '_') {
		return noHit
	}
	labels := 0
	last := ""
	for l := range strings.SplitSeq(dom, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return noHit
		}
		labels++
		last = l
	}
	if labels < 2 || len(last) < 2 || len(last) > 24 || !strings.HasPrefix(last, "xn--") && run(last, isLetter) != len(last) {
		return noHit
	}
	for _, x := range fileTLDs {
		if strings.EqualFold(last, x) {
			return noHit
		}
	}
	return hit{kind: KindEmail, rule: "email", start: s, end: e}
}
