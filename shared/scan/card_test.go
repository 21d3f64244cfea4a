package scan

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// cardTypes is testdata/credit-card-type-10.3.0.json, written by
// testdata/credit-card-type.sh from the npm package credit-card-type: each
// brand's IIN patterns (a prefix, or a range [lo, hi] of prefixes of one
// length), the gaps it prints and the lengths it issues.
type cardTypes struct {
	Source string `json:"source"`
	Brands []struct {
		Type     string            `json:"type"`
		Patterns []json.RawMessage `json:"patterns"`
		Gaps     []int             `json:"gaps"`
		Lengths  []int             `json:"lengths"`
	} `json:"brands"`
}

// prefixes returns the prefixes a pattern stands for: the prefix, or a
// range's ends and middle.
func prefixes(t *testing.T, p json.RawMessage) []int {
	var n int
	if json.Unmarshal(p, &n) == nil {
		return []int{n}
	}
	var r [2]int
	if err := json.Unmarshal(p, &r); err != nil {
		t.Fatalf("pattern %s: %v", p, err)
	}
	return []int{r[0], (r[0] + r[1]) / 2, r[1]}
}

// withLuhn fills prefix to n digits at random and appends the check digit.
func withLuhn(r *rand.Rand, prefix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for b.Len() < n-1 {
		b.WriteByte(byte('0' + r.IntN(10)))
	}
	return b.String() + string(luhnDigit(b.String()))
}

// gapped writes d split at gaps (offsets) by sep.
func gapped(d string, gaps []int, sep string) string {
	var b strings.Builder
	prev := 0
	for _, g := range gaps {
		if g >= len(d) {
			break
		}
		b.WriteString(d[prev:g] + sep)
		prev = g
	}
	return b.String() + d[prev:]
}

// TestCardBrandRanges: for every brand credit-card-type lists, every
// pattern (a range's ends and middle) and every length, a Luhn-valid
// number is found whole: bare, printed with the brand's gaps split by
// spaces, dashes or dots, and as a JSON number; and Redact masks it as
// docs/content.md says ("[masked:card]").
func TestCardBrandRanges(t *testing.T) {
	raw, err := os.ReadFile("testdata/credit-card-type-10.3.0.json")
	if err != nil {
		t.Fatal(err)
	}
	var ct cardTypes
	if err := json.Unmarshal(raw, &ct); err != nil {
		t.Fatal(err)
	}
	if len(ct.Brands) < 15 {
		t.Fatalf("%d brands in %s", len(ct.Brands), ct.Source)
	}
	s := New(nil)
	r := rand.New(rand.NewPCG(7, 32))
	cases := 0
	for _, b := range ct.Brands {
		for _, p := range b.Patterns {
			for _, pre := range prefixes(t, p) {
				for _, n := range b.Lengths {
					d := withLuhn(r, strconv.Itoa(pre), n)
					forms := []string{d, gapped(d, b.Gaps, " "), gapped(d, b.Gaps, "-"), gapped(d, b.Gaps, ".")}
					for _, f := range forms {
						cases++
						in := "paid with " + f + ", thanks"
						fs := s.ScanString(in, nil)
						if len(fs) != 1 || fs[0].Kind != KindCard || in[fs[0].Start:fs[0].End] != f {
							t.Errorf("%s %d digits: %q: %v", b.Type, n, f, fs)
						}
					}
					doc := `{"number":` + d + `,"note":"card ` + forms[1] + `"}`
					out, found, err := s.Redact([]byte(doc), nil)
					if want := `{"number":"[masked:card]","note":"card [masked:card]"}`; err != nil || len(found) != 2 || string(out) != want {
						t.Errorf("%s: Redact(%s) = %s %v %v, want %s", b.Type, doc, out, found, err, want)
					}
				}
			}
		}
	}
	t.Logf("%d numbers of %d brands found in %d forms (%s)", cases/4, len(ct.Brands), cases, ct.Source)
}

// publishedTestCards are card numbers the payment providers publish for
// testing: Stripe's "Testing" page (docs.stripe.com/testing) and
// Braintree's sandbox card list (developer.paypal.com/braintree/docs,
// "Testing and Go Live"). Facts, by brand.
var publishedTestCards = map[string][]string{
	"visa":       {"4242424242424242", "4000056655665556", "4111111111111111", "4005519200000004", "4009348888881881", "4012000033330026", "4012000077777777", "4012888888881881", "4217651111111119", "4500600000000061"},
	"mastercard": {"5555555555554444", "2223003122003222", "5200828282828210", "5105105105105100", "2223000048400011"},
	"amex":       {"378282246310005", "371449635398431"},
	"discover":   {"6011111111111117", "6011000990139424", "6011981111111113", "6011000991300009"},
	"diners":     {"3056930009020004", "36227206271667", "36259600000004"},
	"jcb":        {"3566002020360505", "3530111333300000"},
	"unionpay":   {"6200000000000005", "6200000000000047", "6205500000000000004", "6243030000000001"},
	"maestro":    {"6304000000000000"},
}

// TestPublishedTestCards: every published test number is found, bare and
// in groups of four.
func TestPublishedTestCards(t *testing.T) {
	s := New(nil)
	for brand, ns := range publishedTestCards {
		for _, d := range ns {
			if !luhn([]byte(d)) {
				t.Errorf("%s %s: fails Luhn (mistyped?)", brand, d)
				continue
			}
			for _, f := range []string{d, gapped(d, []int{4, 8, 12, 16}, " ")} {
				fs := s.ScanString("card: "+f, nil)
				if len(fs) != 1 || fs[0].Kind != KindCard || fs[0].End-fs[0].Start != len(f) {
					t.Errorf("%s %q: %v", brand, f, fs)
				}
			}
		}
	}
}

// TestCardsClean: numbers that are not cards stay unfound: cleanTexts,
// Luhn-valid numbers outside every range or of a length their range does
// not issue, mixed separators, an AWS account id.
func TestCardsClean(t *testing.T) {
	s := New(nil)
	for _, c := range cleanTexts {
		if fs := s.ScanString(c, nil); len(fs) > 0 {
			t.Errorf("%q: %v", c, fs)
		}
	}
	r := rand.New(rand.NewPCG(3, 2))
	for _, c := range []struct {
		prefix string
		n      int
	}{{"4", 14}, {"4", 15}, {"4", 17}, {"51", 15}, {"51", 17}, {"34", 16}, {"37", 14}, {"7", 16}, {"0", 16}, {"11", 15}, {"99", 16}, {"83", 16}, {"3000", 13}, {"2721", 16}, {"6011", 11}} {
		d := withLuhn(r, c.prefix, c.n)
		if fs := s.ScanString("id "+d, nil); len(fs) > 0 {
			t.Errorf("%s (%d digits): %v", d, c.n, fs)
		}
	}
	d := withLuhn(r, "4", 16)
	for _, f := range []string{d[:4] + " " + d[4:8] + "-" + d[8:12] + " " + d[12:], d[:4] + "." + d[4:8] + " " + d[8:12] + "." + d[12:], d[:4] + "/" + d[4:8] + "/" + d[8:12] + "/" + d[12:]} {
		if fs := s.ScanString("card "+f, nil); len(fs) > 0 {
			t.Errorf("%q: %v", f, fs)
		}
	}
	acct := withLuhn(r, "56", 12)
	if fs := s.ScanString(fmt.Sprintf("arn:aws:iam::%s:role/deploy and arn:aws:sns:eu-west-1:%s:topic", acct, acct), nil); len(fs) > 0 {
		t.Errorf("AWS account id %s: %v", acct, fs)
	}
}

// TestIINStarts: iinPrefix, skip's and card's first condition, drops no
// four digits that issuer takes as the start of a card number of some
// length (any digits after them: zeros, nines, or Maestro's 493698), and
// drops a year and a Unix time in milliseconds.
func TestIINStarts(t *testing.T) {
	for p := range 10000 {
		pre := fmt.Sprintf("%04d", p)
		taken := false
		for n := 12; n <= 19 && !taken; n++ {
			for _, tail := range []string{"000000000000000", "999999999999999", "980000000000000"} {
				taken = taken || issuer([]byte(pre+tail[:n-4]))
			}
		}
		if taken && !iinPrefix(pre) {
			t.Errorf("%s starts a card number for issuer, iinPrefix drops it", pre)
		}
	}
	for _, d := range []string{"2026", "1999", "1732"} {
		if iinPrefix(d) {
			t.Errorf("iinPrefix(%s) = true", d)
		}
	}
}
